#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/ze/driver.h"

namespace memd::backend {

class ZeCopyDevice;

/// The host-visible events of one copy stream (its markers, wakes and
/// synchronizations), numbered from 0. Made on demand in Level Zero event
/// pools of kEventsPerPool; when every slot is taken another pool is made,
/// so a stream never runs out while the driver has memory. An event given
/// back is reused only once it is known signalled: an event reset while
/// the barrier that signals it is still queued would be signalled again
/// under its next user. Owns the pools and events; destroy it only when no
/// queued work names them (after the command list), or call Abandon.
/// Thread-safe: the stream's thread takes events, its waiter gives some
/// back. Errors as ZeCopyDevice says.
class ZeEvents {
 public:
  static constexpr std::uint32_t kEventsPerPool = 64;

  explicit ZeEvents(ZeCopyDevice& device) : device_(device) {}
  ~ZeEvents();
  ZeEvents(const ZeEvents&) = delete;
  ZeEvents& operator=(const ZeEvents&) = delete;

  // An event that is not signalled and that no queued work names. Errors:
  // the driver's (zeEventPoolCreate, zeEventCreate, zeEventHostReset).
  absl::StatusOr<std::uint32_t> Take();
  // Gives `event` back: reused at once when `signalled` (known to have
  // signalled, or never appended), else once a query finds it signalled.
  void Give(std::uint32_t event, bool signalled);
  ze_event_handle_t handle(std::uint32_t event) const;

  // Work that names the events may still be queued and never finish (a
  // hung device): the destructor leaves them to the driver.
  void Abandon();

 private:
  // Makes one more event, and a pool for it when the last one is full.
  absl::StatusOr<std::uint32_t> Make() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ZeCopyDevice& device_;
  mutable absl::Mutex mu_;
  std::vector<ze_event_pool_handle_t> pools_ ABSL_GUARDED_BY(mu_);
  std::vector<ze_event_handle_t> events_ ABSL_GUARDED_BY(mu_);  // By number.
  // Slots of the last pool in use (full: the next event needs a new pool).
  std::uint32_t in_last_pool_ ABSL_GUARDED_BY(mu_) = kEventsPerPool;
  std::vector<std::uint32_t> free_ ABSL_GUARDED_BY(mu_);  // Signalled, or never used.
  // Given back before they were known signalled, oldest first.
  std::deque<std::uint32_t> unsettled_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace memd::backend
