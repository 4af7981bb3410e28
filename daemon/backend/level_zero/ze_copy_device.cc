#include "daemon/backend/level_zero/ze_copy_device.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/backend/level_zero/ze_copy_stream.h"

namespace memd::backend {

absl::StatusOr<std::unique_ptr<ZeCopyDevice>> ZeCopyDevice::Create(
    std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal,
    Options options) {
  MEMD_ASSIGN_OR_RETURN(const QueueGroup group, CopyQueueGroup(*loader, gpu, ordinal));
  return std::unique_ptr<ZeCopyDevice>(
      new ZeCopyDevice(std::move(loader), gpu, ordinal, group, options));
}

ZeCopyDevice::~ZeCopyDevice() {
  absl::MutexLock lock(&mu_);
  for (void* memory : staging_) loader_->api().MemFree(gpu_.context, memory);
}

absl::Status ZeCopyDevice::health() const { return health_.status(); }

absl::Status ZeCopyDevice::Status(ze_result_t result, std::string_view call, CopyCall kind) {
  absl::Status status = ZeCopyStatus(*loader_, result, call, ordinal_, kind);
  if (!status.ok() && IsStickyZeError(result)) health_.Break(status);
  return status;
}

absl::StatusOr<std::span<std::byte>> ZeCopyDevice::AllocateStaging(std::uint64_t bytes) {
  MEMD_RETURN_IF_ERROR(health());
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging memory of 0 bytes asked of device ", ordinal_));
  }
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  ze_host_mem_alloc_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC;
  void* memory = nullptr;
  MEMD_RETURN_IF_ERROR(Status(loader_->api().MemAllocHost(gpu_.context, &desc, bytes, page, &memory),
                              absl::StrCat("zeMemAllocHost(", bytes, " bytes)"),
                              CopyCall::kStaging));
  // Fault every page in now, not during the first transfer.
  auto* first = static_cast<std::byte*>(memory);
  for (std::uint64_t at = 0; at < bytes; at += page) first[at] = std::byte{0};
  absl::MutexLock lock(&mu_);
  staging_.push_back(memory);
  return std::span<std::byte>(first, bytes);
}

absl::StatusOr<std::unique_ptr<CopyStream>> ZeCopyDevice::NewStream() {
  MEMD_RETURN_IF_ERROR(health());
  // The engine makes several streams per device: spread over the group's
  // engines, they move bytes side by side where the GPU has several.
  const std::uint32_t queue = next_queue_.fetch_add(1) % group_.queues;
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<ZeCopyStream> stream, ZeCopyStream::Create(*this, queue));
  return std::unique_ptr<CopyStream>(std::move(stream));
}

}  // namespace memd::backend
