#include "daemon/transfer/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "daemon/transfer/device_lane.h"
#include "daemon/transfer/engine_core.h"
#include "daemon/transfer/host_lane.h"
#include "daemon/transfer/plan.h"

namespace memd::transfer {
namespace {

constexpr std::uint64_t kMinChunk = std::uint64_t{1} << 20;
constexpr std::uint64_t kMaxSlot = std::uint64_t{1} << 30;

absl::Status OutOfRange(absl::string_view option, absl::string_view value,
                        absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat("transfer engine option ", option, " is ", value, "; it must be ", range));
}

absl::Status CheckOptions(const EngineOptions& o) {
  if (o.slot_bytes < kMinChunk || o.slot_bytes > kMaxSlot) {
    return OutOfRange("slot_bytes", FormatBytes(o.slot_bytes), "1 MiB .. 1 GiB");
  }
  if (o.chunk_bytes < kMinChunk || o.chunk_bytes > o.slot_bytes) {
    return OutOfRange("chunk_bytes", FormatBytes(o.chunk_bytes),
                      absl::StrCat("1 MiB .. slot_bytes (", FormatBytes(o.slot_bytes), ")"));
  }
  if (o.staging_slots < 1 || o.staging_slots > 256) {
    return OutOfRange("staging_slots", absl::StrCat(o.staging_slots), "1 .. 256");
  }
  if (o.copy_threads < 1 || o.copy_threads > kMaxCopyThreads) {
    return OutOfRange("copy_threads", absl::StrCat(o.copy_threads),
                      absl::StrCat("1 .. ", kMaxCopyThreads));
  }
  if (o.chunks_in_flight < 1 || o.chunks_in_flight > 64) {
    return OutOfRange("chunks_in_flight", absl::StrCat(o.chunks_in_flight), "1 .. 64");
  }
  if (o.max_session_bytes == 0 || o.max_uid_bytes == 0 || o.max_total_bytes == 0 ||
      o.max_session_transfers < 1 || o.max_uid_transfers < 1 || o.max_session_watches < 1 ||
      o.max_critical_run < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer engine limits must be positive: max_session_bytes ", o.max_session_bytes,
        ", max_uid_bytes ", o.max_uid_bytes, ", max_total_bytes ", o.max_total_bytes,
        ", max_session_transfers ", o.max_session_transfers, ", max_uid_transfers ",
        o.max_uid_transfers, ", max_session_watches ", o.max_session_watches,
        ", max_critical_run ", o.max_critical_run));
  }
  if (o.kept_finished_per_session < 0 || o.max_retries < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer engine counts must not be negative: kept_finished_per_session ",
        o.kept_finished_per_session, ", max_retries ", o.max_retries));
  }
  if (o.stall_timeout <= absl::ZeroDuration() || o.ageing <= absl::ZeroDuration() ||
      o.retry_backoff < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer engine durations must be positive: stall_timeout ",
        absl::FormatDuration(o.stall_timeout), ", ageing ", absl::FormatDuration(o.ageing),
        ", retry_backoff ", absl::FormatDuration(o.retry_backoff)));
  }
  return absl::OkStatus();
}

}  // namespace

// Owns the devices, the shared state and the lanes; destroyed lanes first
// (their streams and rings), then the core, then the devices.
class Engine::Impl {
 public:
  Impl(std::vector<std::unique_ptr<backend::CopyDevice>> devices, const EngineOptions& options,
       const Clock& clock)
      : devices_(std::move(devices)), core_(options, Raw(devices_), clock) {
    for (const auto& device : devices_) ordinals_.push_back(device->ordinal());
  }
  ~Impl() {
    core_.CancelAll(FailureReason::kShutdown);
    for (auto& lane : lanes_) lane->Stop();
    lanes_.clear();
  }

  absl::Status StartLanes() {
    lanes_.push_back(std::make_unique<HostLane>(core_, core_.options().copy_threads));
    for (int i = 0; i < core_.device_count(); ++i) {
      MEMD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceLane> lane, DeviceLane::Create(core_, i));
      lanes_.push_back(std::move(lane));
    }
    std::vector<Lane*> lanes;
    for (auto& lane : lanes_) lanes.push_back(lane.get());
    core_.SetLanes(std::move(lanes));
    for (auto& lane : lanes_) lane->Start();
    return absl::OkStatus();
  }

  absl::StatusOr<TransferId> Submit(TransferSpec spec) {
    MEMD_ASSIGN_OR_RETURN(RecordPtr record,
                          PlanTransfer(std::move(spec), core_.options(), ordinals_));
    return core_.Submit(std::move(record));  // Which refuses a broken device's copies.
  }

  EngineCore& core() { return core_; }

 private:
  static std::vector<backend::CopyDevice*> Raw(
      const std::vector<std::unique_ptr<backend::CopyDevice>>& devices) {
    std::vector<backend::CopyDevice*> raw;
    for (const auto& device : devices) raw.push_back(device.get());
    return raw;
  }

  std::vector<std::unique_ptr<backend::CopyDevice>> devices_;
  std::vector<int> ordinals_;
  EngineCore core_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(
    std::vector<std::unique_ptr<backend::CopyDevice>> devices, EngineOptions options,
    const Clock& clock) {
  MEMD_RETURN_IF_ERROR(CheckOptions(options));
  auto impl = std::make_unique<Impl>(std::move(devices), options, clock);
  MEMD_RETURN_IF_ERROR(impl->StartLanes());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

absl::StatusOr<TransferId> Engine::Submit(TransferSpec spec) {
  return impl_->Submit(std::move(spec));
}

absl::StatusOr<TransferProgress> Engine::Progress(SessionId session, TransferId id) const {
  return impl_->core().Progress(session, id);
}

absl::StatusOr<std::uint64_t> Engine::Watch(SessionId session, TransferId id, Done done) {
  return impl_->core().Watch(session, id, std::move(done));
}

bool Engine::CancelWatch(std::uint64_t watch) { return impl_->core().CancelWatch(watch); }

absl::StatusOr<TransferProgress> Engine::Cancel(SessionId session, TransferId id) {
  return impl_->core().Cancel(session, id);
}

void Engine::EndSession(SessionId session, absl::Duration drain) {
  impl_->core().EndSession(session, drain);
}

void Engine::CancelWritesTo(std::uint64_t buffer_id) { impl_->core().CancelWritesTo(buffer_id); }

std::vector<TransferId> Engine::WritersOf(SessionId session, std::uint64_t buffer_id) const {
  return impl_->core().WritersOf(session, buffer_id);
}

TransferListing Engine::List(std::optional<uid_t> only, std::size_t most) const {
  return impl_->core().List(only, most);
}

EngineStats Engine::Stats() const { return impl_->core().Stats(); }

TransferActivity Engine::UidActivity(uid_t uid) const { return impl_->core().UidActivity(uid); }

absl::Status Engine::SetMaxSessionWatches(int most) {
  if (most < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_session_watches must be positive, not ", most));
  }
  impl_->core().SetMaxSessionWatches(most);
  return absl::OkStatus();
}

}  // namespace memd::transfer
