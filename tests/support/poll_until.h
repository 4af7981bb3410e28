#pragma once

// The one poll of the tests. A daemon in another process cannot tell a test
// that a session ended, a lease was released or an open started waiting:
// memd has no call that blocks until its state changes, and adding one for
// tests would be a surface attackers could hold open. So a test asks again
// (Stats, Stat, ListSessions) until the answer is the one it waits for,
// here and nowhere else. The guard only stops a daemon that never gets
// there; no test asserts how long it took.

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memd::test {

// Calls `done` until it returns true, a millisecond apart, for at most
// `guard`. Returns whether it did.
inline bool PollUntil(const std::function<bool()>& done,
                      absl::Duration guard = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + guard;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace memd::test
