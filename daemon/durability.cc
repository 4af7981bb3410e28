#include "daemon/durability.h"

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace memd {
namespace {

// The UUID of the GPU at `location` ("" for host memory), which adoption
// checks: ordinals follow the driver's order, which can change.
std::function<std::string(const Location&)> UuidsOf(const backend::Backend& backend) {
  std::map<int, std::string> uuids;
  for (const backend::DeviceInfo& device : backend.devices()) uuids[device.ordinal] = device.uuid;
  return [uuids = std::move(uuids)](const Location& location) -> std::string {
    if (location.kind != Location::Kind::kDevice) return "";
    auto it = uuids.find(location.device);
    return it == uuids.end() ? "" : it->second;
  };
}

}  // namespace

std::unique_ptr<Durability> Durability::Prepare(const Config& config,
                                                const backend::Backend& backend) {
  std::unique_ptr<Durability> durability(new Durability());
  std::unique_ptr<durable::FdStore> manager = durable::ServiceManagerStore();
  auto listened = durable::TakeListenedFds();
  if (listened.ok()) {
    durability->listened_ = std::move(*listened);
  } else {
    spdlog::error("durability: the descriptors memd was started with cannot be read: {}",
                  listened.status().ToString());
  }
  if (config.durability == "off") {
    spdlog::info("durability: off; a restart frees every buffer");
    // What an earlier memd stored is of no use now: the store lets it go.
    for (const durable::ListenedFd& fd : durability->listened_) {
      if (manager != nullptr) (void)manager->Remove(fd.name);
    }
    durability->listened_.clear();
    durability->not_recording_ = "durability = \"off\" in the configuration";
    return durability;
  }
  if (manager == nullptr) {
    spdlog::warn(
        "durability: no descriptor store ($NOTIFY_SOCKET is unset: not started by systemd); "
        "buffers survive an in-place upgrade (SIGUSR2) but not a crash or a restart");
  }
  durability->store_ = std::make_unique<durable::MirrorStore>(std::move(manager));
  durability->recorder_ =
      std::make_unique<durable::Recorder>(*durability->store_, UuidsOf(backend),
                                          config.durable_segments_per_uid);
  return durability;
}

Durability::~Durability() { Detach(); }

void Durability::Recover(backend::Backend& backend, pool::PoolSet& pools,
                         broker::Broker& broker, const Clock& clock) {
  if (recorder_ == nullptr) return;
  durable::Recovered recovered = durable::Recover(
      std::move(listened_), backend, pools, broker, store_.get(), clock,
      [this](const std::string& name, int fd) {
        if (absl::Status kept = store_->Keep(name, fd); !kept.ok()) {
          spdlog::error("durability: {} will not pass an upgrade: {}", name, kept.ToString());
        }
      });
  report_ = recovered.report;
  if (report_.recovered) {
    spdlog::warn("durability: {}", report_.summary);
  } else {
    spdlog::info("durability: {}", report_.summary);
  }
  // Not begun, the recorder records nothing (the pools keep their pointer).
  if (absl::Status begun = recorder_->Begin(recovered.state, recovered.epoch,
                                            std::move(recovered.stale_names));
      !begun.ok()) {
    spdlog::error("durability: cannot record the state ({}); buffers will not outlive this memd",
                  begun.ToString());
    not_recording_ = absl::StrCat("the state cannot be recorded: ", begun.ToString());
  } else {
    broker.SetJournal(recorder_.get());
    recording_ = true;
  }
}

durable::DurabilityStatus Durability::status() const {
  // "Recording" promises what operators expect of it: the buffers outlive a
  // crash. memd's own copy alone keeps them across an upgrade only.
  if (recording_ && !store_->has_upstream()) {
    return {false,
            "no descriptor store (not started by systemd): buffers survive an in-place "
            "upgrade (SIGUSR2), not a crash or a restart",
            report_};
  }
  return {recording_, recording_ ? std::string() : not_recording_, report_};
}

void Durability::StartGrace(broker::Broker& broker, absl::Duration grace) {
  if (!report_.recovered || grace_.joinable()) return;
  grace_ = std::thread([this, &broker, grace] {
    if (stop_grace_.WaitForNotificationWithTimeout(grace)) return;
    const std::uint64_t gone = broker.EndGrace();
    spdlog::info("durability: grace period over; {} adopted buffers nobody came back for went",
                 gone);
  });
}

std::vector<durable::PassedFd> Durability::HandOff() {
  Detach();
  if (store_ == nullptr) return {};
  return store_->HandOff();
}

void Durability::Detach() {
  // The broker keeps its pointer: the recorder outlives it and, detached,
  // records nothing.
  recording_ = false;
  if (recorder_ != nullptr) recorder_->Detach();
  if (!stop_grace_.HasBeenNotified()) stop_grace_.Notify();
  if (grace_.joinable()) grace_.join();
}

}  // namespace memd
