#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"  // Users of clock.h have long had absl::Now from here.
#include "absl/time/time.h"

namespace memd {

/// The time, and the waits for a time, injectable so that tests control
/// both: whatever decides by the clock (a lease's grace, a trim, a copy's
/// deadline, retry or stall) reads Now() here, and a thread that sleeps
/// until a time sleeps in WaitWithDeadline here, so that a fake clock a
/// test moves on wakes it. Implementations own nothing and are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Waits on `cv`, `mu` held, as CondVar::WaitWithDeadline does, until `cv`
  // is signalled or this clock reaches `deadline`. True when the deadline
  // has passed in this clock's time; false when signalled, or woken for no
  // reason: callers check their condition in a loop, as with any CondVar.
  virtual bool WaitWithDeadline(absl::Mutex* mu, absl::CondVar* cv, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

/// The system's clock (absl::Now) and CondVar deadlines. Thread-safe; owns
/// nothing.
class RealClock : public Clock {
 public:
  // One for the process: for those that take a clock and are given none.
  static const RealClock& Default();

  absl::Time Now() const override;
  bool WaitWithDeadline(absl::Mutex* mu, absl::CondVar* cv, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;
};

}  // namespace memd
