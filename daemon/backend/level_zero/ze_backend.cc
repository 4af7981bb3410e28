#include "daemon/backend/level_zero/ze_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/backend/level_zero/ze_copy_device.h"

namespace memd::backend {
namespace {

// Allocations and the offsets carved from them keep to 2 MiB: what Intel's
// driver pools small allocations into, and large pages on every GPU.
constexpr std::uint64_t kAlignment = std::uint64_t{2} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<ZeBackend>> ZeBackend::Create(
    std::shared_ptr<const ze::Loader> loader, int first_ordinal) {
  std::unique_ptr<ZeBackend> backend(new ZeBackend(loader, first_ordinal));
  std::vector<std::string> skipped;
  for (const ze::Gpu& gpu : loader->gpus()) {
    const int ordinal = first_ordinal + static_cast<int>(backend->devices_.size());
    if (!gpu.ipc) {
      skipped.push_back(absl::StrCat(gpu.name, " (", gpu.uuid, ")"));
      continue;
    }
    ZeDevice device{ordinal, gpu, kAlignment, nullptr};
    MEMD_ASSIGN_OR_RETURN(device.queue, ZeQueue::Create(loader, gpu, ordinal));
    backend->devices_.push_back(std::move(device));
  }
  if (backend->devices_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the Level Zero loader ", loader->path(), " sees no GPU that can pass memory "
        "between processes",
        skipped.empty() ? "" : absl::StrCat(" (without IPC: ", absl::StrJoin(skipped, ", "), ")")));
  }
  return backend;
}

std::vector<Location> ZeBackend::locations() const {
  std::vector<Location> locations = {Location::Host(), Location::Pinned()};
  for (const ZeDevice& device : devices_) locations.push_back(Location::Device(device.ordinal));
  return locations;
}

const ZeDevice* ZeBackend::Find(int ordinal) const {
  const int index = ordinal - first_ordinal_;
  if (index < 0 || index >= static_cast<int>(devices_.size())) return nullptr;
  return &devices_[index];
}

std::uint64_t ZeBackend::alignment(const Location& location) const {
  if (location.kind == Location::Kind::kDevice && Find(location.device) != nullptr) {
    return kAlignment;
  }
  return host_.alignment(Location::Host());
}

absl::StatusOr<std::unique_ptr<Segment>> ZeBackend::ReserveOnNode(const Location& location,
                                                                 std::uint64_t bytes,
                                                                 int numa_node) {
  if (location.kind != Location::Kind::kDevice) {
    return host_.ReserveOnNode(location, bytes, numa_node);
  }
  if (numa_node >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device memory is not placed on a NUMA node (asked ", location.ToString(),
        " on node ", numa_node, ")"));
  }
  return Reserve(location, bytes);
}

absl::StatusOr<std::unique_ptr<Segment>> ZeBackend::Reserve(const Location& location,
                                                           std::uint64_t bytes) {
  if (location.kind != Location::Kind::kDevice) return host_.Reserve(location, bytes);
  const ZeDevice* device = Find(location.device);
  if (device == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no Level Zero device ", location.device, " (memd serves them as device:",
        first_ordinal_, " to device:", first_ordinal_ + device_count() - 1, ")"));
  }
  if (bytes == 0 || bytes % kAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat("segment size ", bytes,
                                                   " is not a positive multiple of ",
                                                   kAlignment, " on device ", device->ordinal));
  }
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<ZeSegment> segment,
                        ZeSegment::Create(loader_, *device, bytes));
  return std::unique_ptr<Segment>(std::move(segment));
}

std::vector<DeviceInfo> ZeBackend::devices() const {
  std::vector<DeviceInfo> infos;
  for (const ZeDevice& device : devices_) {
    DeviceInfo info;
    info.ordinal = device.ordinal;
    info.uuid = device.gpu.uuid;
    info.name = device.gpu.name;
    info.total_bytes = device.gpu.memory_bytes;
    // Level Zero 1.4 reports no free memory (that is zesMemoryGetState,
    // Sysman); 0 says "unknown", as for a device a driver cannot query.
    info.handle_type = HandleType::kLevelZeroIpc;
    info.api = "level_zero";
    info.pci_address = device.gpu.pci_address;
    info.ipc = device.gpu.ipc;
    infos.push_back(std::move(info));
  }
  return infos;
}

absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> ZeBackend::CopyDevices() {
  std::vector<std::unique_ptr<CopyDevice>> copy_devices;
  for (const ZeDevice& device : devices_) {
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<ZeCopyDevice> copy,
                          ZeCopyDevice::Create(loader_, device.gpu, device.ordinal));
    copy_devices.push_back(std::move(copy));
  }
  return copy_devices;
}

}  // namespace memd::backend
