#include "daemon/backend/level_zero/ze_copy_stream.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace memd::backend {

absl::StatusOr<std::unique_ptr<ZeCopyStream>> ZeCopyStream::Create(ZeCopyDevice& device,
                                                                   std::uint32_t queue) {
  const ze::Gpu& gpu = device.gpu();
  ze_command_queue_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
  desc.ordinal = device.queue_group().ordinal;
  // A queue of the group by its index, which the spec honours only with
  // EXPLICIT_ONLY (else the index must be 0 and the driver picks): each
  // stream stays on one engine, and the device's streams take turns.
  desc.flags = ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY;
  desc.index = queue;
  desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  desc.priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL;
  ze_command_list_handle_t list = nullptr;
  MEMD_RETURN_IF_ERROR(device.Status(
      device.loader().api().CommandListCreateImmediate(gpu.context, gpu.device, &desc, &list),
      absl::StrCat("zeCommandListCreateImmediate(queue group ", desc.ordinal, ", queue ", queue,
                   ")"),
      CopyCall::kEnqueue));
  return std::unique_ptr<ZeCopyStream>(new ZeCopyStream(device, list));
}

ZeCopyStream::~ZeCopyStream() {
  const bool drained = Drain();
  waiter_.Stop();
  if (!drained && device_.health().ok()) {
    // Destroying the list would wait for the work the device never
    // finished: leave it, and the events that work names, to the driver.
    events_.Abandon();
    return;
  }
  api_.CommandListDestroy(list_);
}

bool ZeCopyStream::Drain() {
  // A marker polled, not a host wait: the wait has no timeout that a hung
  // device would honour for sure. A transient failure is tried again until
  // the deadline; a broken device has nothing left to drain.
  const absl::Time deadline = absl::Now() + device_.options().drain_timeout;
  std::optional<Marker> last;
  for (;;) {
    if (!device_.health().ok()) return false;
    if (!last) {
      absl::StatusOr<Marker> marked = Mark();
      if (marked.ok()) last = *marked;
    }
    if (last) {
      absl::StatusOr<bool> reached = Reached(*last);
      if (reached.ok() && *reached) {
        Forget(*last);
        return true;
      }
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

absl::Status ZeCopyStream::Copy(void* destination, const void* source, std::uint64_t bytes,
                                std::string_view direction) {
  MEMD_RETURN_IF_ERROR(device_.health());
  return device_.Status(
      api_.CommandListAppendMemoryCopy(list_, destination, source, bytes, nullptr, 0, nullptr),
      absl::StrCat("zeCommandListAppendMemoryCopy(",
                   absl::string_view(direction.data(), direction.size()), ", ", bytes,
                   " bytes)"),
      CopyCall::kEnqueue);
}

absl::Status ZeCopyStream::HostToDevice(DeviceAddress destination, const void* source,
                                        std::uint64_t bytes) {
  return Copy(reinterpret_cast<void*>(destination), source, bytes, "host to device");
}

absl::Status ZeCopyStream::DeviceToHost(void* destination, DeviceAddress source,
                                        std::uint64_t bytes) {
  return Copy(destination, reinterpret_cast<const void*>(source), bytes, "device to host");
}

absl::Status ZeCopyStream::DeviceToDevice(DeviceAddress destination, DeviceAddress source,
                                          std::uint64_t bytes) {
  return Copy(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes,
              "device to device");
}

absl::StatusOr<std::uint32_t> ZeCopyStream::Barrier() {
  MEMD_ASSIGN_OR_RETURN(const std::uint32_t event, events_.Take());
  absl::Status appended =
      device_.Status(api_.CommandListAppendBarrier(list_, events_.handle(event), 0, nullptr),
                     "zeCommandListAppendBarrier", CopyCall::kEnqueue);
  if (!appended.ok()) {
    events_.Give(event, /*signalled=*/true);  // Never appended: as good as new.
    return appended;
  }
  return event;
}

absl::StatusOr<Marker> ZeCopyStream::Mark() {
  MEMD_RETURN_IF_ERROR(device_.health());
  MEMD_ASSIGN_OR_RETURN(const std::uint32_t event, Barrier());
  if (event >= markers_.size()) markers_.resize(event + 1, MarkerState::kNone);
  markers_[event] = MarkerState::kLive;
  return event;
}

absl::StatusOr<bool> ZeCopyStream::Reached(Marker marker) {
  if (marker >= markers_.size() || markers_[marker] == MarkerState::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("marker ", marker, " is not live on this stream of device ",
                     device_.ordinal()));
  }
  MEMD_RETURN_IF_ERROR(device_.health());
  if (markers_[marker] == MarkerState::kReached) return true;
  const ze_result_t result = api_.EventQueryStatus(events_.handle(marker));
  if (result == ZE_RESULT_NOT_READY) return false;
  MEMD_RETURN_IF_ERROR(device_.Status(result, "zeEventQueryStatus", CopyCall::kSurface));
  markers_[marker] = MarkerState::kReached;
  return true;
}

void ZeCopyStream::Forget(Marker marker) {
  if (marker >= markers_.size() || markers_[marker] == MarkerState::kNone) return;
  events_.Give(marker, markers_[marker] == MarkerState::kReached);
  markers_[marker] = MarkerState::kNone;
}

absl::Status ZeCopyStream::WakeWhenDone(std::function<void()> wake) {
  MEMD_RETURN_IF_ERROR(device_.health());
  MEMD_ASSIGN_OR_RETURN(const std::uint32_t event, Barrier());
  waiter_.Add(event, std::move(wake));
  return absl::OkStatus();
}

absl::Status ZeCopyStream::Synchronize() {
  MEMD_RETURN_IF_ERROR(device_.health());
  MEMD_ASSIGN_OR_RETURN(const std::uint32_t event, Barrier());
  const ze_result_t result = api_.EventHostSynchronize(events_.handle(event), UINT64_MAX);
  events_.Give(event, result == ZE_RESULT_SUCCESS);
  return device_.Status(result, "zeEventHostSynchronize", CopyCall::kSurface);
}

}  // namespace memd::backend
