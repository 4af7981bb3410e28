#include "daemon/backend/level_zero/ze_queue.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::backend {

absl::StatusOr<QueueGroup> CopyQueueGroup(const ze::Loader& loader, const ze::Gpu& gpu,
                                          int ordinal) {
  const ze::LoaderApi& api = loader.api();
  uint32_t count = 0;
  MEMD_RETURN_IF_ERROR(loader.Check(
      api.DeviceGetCommandQueueGroupProperties(gpu.device, &count, nullptr),
      "zeDeviceGetCommandQueueGroupProperties", ordinal));
  std::vector<ze_command_queue_group_properties_t> groups(count);
  for (auto& group : groups) group.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
  MEMD_RETURN_IF_ERROR(loader.Check(
      api.DeviceGetCommandQueueGroupProperties(gpu.device, &count, groups.data()),
      "zeDeviceGetCommandQueueGroupProperties", ordinal));
  std::optional<QueueGroup> copies;
  for (std::uint32_t i = 0; i < count && i < groups.size(); ++i) {
    const auto flags = groups[i].flags;
    if ((flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY) == 0) continue;
    const QueueGroup group{i, std::max<std::uint32_t>(groups[i].numQueues, 1)};
    if ((flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) == 0) return group;
    if (!copies) copies = group;
  }
  if (copies) return *copies;
  return absl::NotFoundError(
      absl::StrCat("device ", ordinal, " has no command queue group that copies"));
}

absl::StatusOr<std::unique_ptr<ZeQueue>> ZeQueue::Create(
    std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal) {
  const ze::LoaderApi& api = loader->api();
  MEMD_ASSIGN_OR_RETURN(const QueueGroup group, CopyQueueGroup(*loader, gpu, ordinal));
  std::unique_ptr<ZeQueue> queue(new ZeQueue(loader, ordinal));
  absl::MutexLock lock(&queue->mu_);
  ze_command_queue_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  desc.ordinal = group.ordinal;
  desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  MEMD_RETURN_IF_ERROR(loader->Check(
      api.CommandListCreateImmediate(gpu.context, gpu.device, &desc, &queue->list_),
      "zeCommandListCreateImmediate", ordinal));
  ze_event_pool_desc_t pool_desc{};
  pool_desc.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC;
  pool_desc.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
  pool_desc.count = 1;
  ze_device_handle_t device = gpu.device;
  MEMD_RETURN_IF_ERROR(loader->Check(
      api.EventPoolCreate(gpu.context, &pool_desc, 1, &device, &queue->pool_),
      "zeEventPoolCreate", ordinal));
  ze_event_desc_t event_desc{};
  event_desc.stype = ZE_STRUCTURE_TYPE_EVENT_DESC;
  event_desc.index = 0;
  event_desc.signal = ZE_EVENT_SCOPE_FLAG_HOST;
  event_desc.wait = ZE_EVENT_SCOPE_FLAG_HOST;
  MEMD_RETURN_IF_ERROR(loader->Check(api.EventCreate(queue->pool_, &event_desc, &queue->done_),
                                     "zeEventCreate", ordinal));
  return queue;
}

ZeQueue::~ZeQueue() {
  const ze::LoaderApi& api = loader_->api();
  absl::MutexLock lock(&mu_);
  if (done_ != nullptr) api.EventDestroy(done_);
  if (pool_ != nullptr) api.EventPoolDestroy(pool_);
  if (list_ != nullptr) api.CommandListDestroy(list_);
}

absl::Status ZeQueue::Zero(void* destination, std::uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  const std::uint8_t zero = 0;
  MEMD_RETURN_IF_ERROR(loader_->Check(
      loader_->api().CommandListAppendMemoryFill(list_, destination, &zero, sizeof(zero), bytes,
                                                 done_, 0, nullptr),
      "zeCommandListAppendMemoryFill", ordinal_));
  return WaitLocked("zeCommandListAppendMemoryFill");
}

absl::Status ZeQueue::Copy(void* destination, const void* source, std::uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  MEMD_RETURN_IF_ERROR(loader_->Check(
      loader_->api().CommandListAppendMemoryCopy(list_, destination, source, bytes, done_, 0,
                                                 nullptr),
      "zeCommandListAppendMemoryCopy", ordinal_));
  return WaitLocked("zeCommandListAppendMemoryCopy");
}

absl::Status ZeQueue::WaitLocked(std::string_view call) {
  const ze::LoaderApi& api = loader_->api();
  // No timeout: the command is queued and a GPU that never finishes it has
  // failed (the driver reports a lost device).
  absl::Status waited = loader_->Check(api.EventHostSynchronize(done_, UINT64_MAX),
                                       "zeEventHostSynchronize", ordinal_);
  absl::Status reset = loader_->Check(api.EventHostReset(done_), "zeEventHostReset", ordinal_);
  if (!waited.ok()) {
    return absl::Status(waited.code(), absl::StrCat("waiting for ", absl::string_view(call.data(), call.size()), ": ", waited.message()));
  }
  return reset;
}

}  // namespace memd::backend
