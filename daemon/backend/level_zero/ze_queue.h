#pragma once

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/ze/driver.h"

namespace memd::backend {

/// One in-order immediate command list on a Level Zero GPU (its copy engine
/// where the device has one), with an event to wait on, for the daemon's
/// own synchronous work: scrubbing a segment, copying into and out of one.
/// Owns the command list, the event and its pool. Thread-safe: a mutex
/// serialises the callers, since a command list is not.
class ZeQueue {
 public:
  // Errors: the driver's (Loader::Check) for `device`, named by `ordinal`.
  static absl::StatusOr<std::unique_ptr<ZeQueue>> Create(
      std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal);
  ~ZeQueue();

  // Sets `bytes` at `destination` (device memory of this device) to zero,
  // and returns once done. Errors: the driver's.
  absl::Status Zero(void* destination, std::uint64_t bytes);
  // Copies `bytes` between any two pointers the device reaches (device
  // memory, host memory), and returns once done. Errors: the driver's.
  absl::Status Copy(void* destination, const void* source, std::uint64_t bytes);

 private:
  ZeQueue(std::shared_ptr<const ze::Loader> loader, int ordinal)
      : loader_(std::move(loader)), ordinal_(ordinal) {}
  // Waits for the event the last append signals, then resets it.
  absl::Status WaitLocked(std::string_view call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const ze::Loader> loader_;
  const int ordinal_;
  absl::Mutex mu_;
  ze_command_list_handle_t list_ ABSL_GUARDED_BY(mu_) = nullptr;
  ze_event_pool_handle_t pool_ = nullptr;
  ze_event_handle_t done_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A command queue group of a device: its ordinal and how many queues
// (engines) it has.
struct QueueGroup {
  std::uint32_t ordinal = 0;
  std::uint32_t queues = 1;
};

// The device's queue group to copy on: the first copy-only group (its copy
// engines move bytes without taking compute engines from the
// applications), else the first one that copies. Errors: the driver's;
// NOT_FOUND when no group copies.
absl::StatusOr<QueueGroup> CopyQueueGroup(const ze::Loader& loader, const ze::Gpu& gpu,
                                          int ordinal);

}  // namespace memd::backend
