#include "daemon/backend/level_zero/ze_segment.h"

#include <fcntl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::backend {

int IpcHandleFd(const ze_ipc_mem_handle_t& handle) {
  std::uint64_t fd = 0;
  std::memcpy(&fd, handle.data, sizeof(fd));
  return fd > static_cast<std::uint64_t>(INT32_MAX) ? -1 : static_cast<int>(fd);
}

absl::StatusOr<std::unique_ptr<ZeSegment>> ZeSegment::Create(
    std::shared_ptr<const ze::Loader> loader, const ZeDevice& device, std::uint64_t bytes) {
  std::unique_ptr<ZeSegment> segment(new ZeSegment(loader, device, bytes));
  ze_device_mem_alloc_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
  MEMD_RETURN_IF_ERROR(loader->Check(
      loader->api().MemAllocDevice(device.gpu.context, &desc, bytes, device.alignment,
                                   device.gpu.device, &segment->address_),
      "zeMemAllocDevice", device.ordinal));
  MEMD_RETURN_IF_ERROR(segment->GetHandles());
  return segment;
}

absl::Status ZeSegment::GetHandles() {
  const ze::LoaderApi& api = loader_->api();
  ze_ipc_mem_handle_t first{}, second{};
  MEMD_RETURN_IF_ERROR(loader_->Check(
      api.MemGetIpcHandle(device_.gpu.context, address_, &first), "zeMemGetIpcHandle",
      device_.ordinal));
  if (api.MemPutIpcHandle != nullptr) to_put_.push_back(first);
  // Should this second call fail, whose the first descriptor is stays
  // unknown: it is left open (one descriptor, on an error path) rather than
  // closed under a driver that caches it.
  MEMD_RETURN_IF_ERROR(loader_->Check(
      api.MemGetIpcHandle(device_.gpu.context, address_, &second), "zeMemGetIpcHandle",
      device_.ordinal));
  if (api.MemPutIpcHandle != nullptr) to_put_.push_back(second);
  const int fd = IpcHandleFd(first), again = IpcHandleFd(second);
  const bool open = fd >= 0 && ::fcntl(fd, F_GETFD) >= 0 && again >= 0 &&
                    ::fcntl(again, F_GETFD) >= 0;
  if (open && api.MemPutIpcHandle == nullptr && again != fd) {
    owned_fd_.reset(fd);  // A fresh descriptor per call: both are memd's.
    ::close(again);
  }
  if (!open) {
    return absl::InternalError(absl::StrCat(
        "zeMemGetIpcHandle on device ", device_.ordinal,
        " gave a handle without an open descriptor in its first 8 bytes (Intel's layout); "
        "memd cannot pass this driver's handles between processes"));
  }
  exported_fd_ = fd;
  handle_.assign(first.data, sizeof(first.data));
  return absl::OkStatus();
}

ZeSegment::~ZeSegment() {
  if (address_ == nullptr) return;
  const ze::LoaderApi& api = loader_->api();
  // Put before the free: a put after it is illegal.
  for (const ze_ipc_mem_handle_t& handle : to_put_) {
    api.MemPutIpcHandle(device_.gpu.context, handle);
  }
  api.MemFree(device_.gpu.context, address_);
}

absl::Status ZeSegment::Scrub() { return device_.queue->Zero(address_, size_); }

}  // namespace memd::backend
