#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace memd::backend {

class ZeCopyDevice;
class ZeEvents;

/// Runs one copy stream's WakeWhenDone callbacks. Level Zero has no host
/// function to queue (cuLaunchHostFunc) and no wait for any of several
/// events, so a thread of the stream's own waits (zeEventHostSynchronize)
/// for each wake's event in the order they were added, which is the order
/// the in-order stream signals them, and then runs the callback. A
/// blocking wait, not a poll: the callback runs as soon as the driver says
/// so, and an idle stream costs nothing. The thread starts at the first Add.
///
/// Owns the thread and the pending callbacks; the events are the stream's
/// ZeEvents', given back once waited for. Thread-safe: Add never waits for
/// the driver.
class ZeWaiter {
 public:
  ZeWaiter(ZeCopyDevice& device, ZeEvents& events) : device_(device), events_(events) {}
  // Stop().
  ~ZeWaiter();
  ZeWaiter(const ZeWaiter&) = delete;
  ZeWaiter& operator=(const ZeWaiter&) = delete;

  // Calls `wake` on the waiter's thread once `event` (taken from the
  // stream's ZeEvents, appended to signal) has signalled, or once waiting
  // for it failed (a lost device: the callback then lets its caller see
  // the error at once), and gives the event back.
  void Add(std::uint32_t event, std::function<void()> wake);

  // Ends the thread and returns once it has: the wait in progress is cut
  // short (its event signalled from the host) and callbacks not run yet
  // never run. Their events go back unsettled. Idempotent.
  void Stop();

 private:
  struct Pending {
    std::uint32_t event = 0;
    std::function<void()> wake;
  };

  void Run();

  ZeCopyDevice& device_;
  ZeEvents& events_;
  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started under mu_ by the first Add; joined by Stop.
};

}  // namespace memd::backend
