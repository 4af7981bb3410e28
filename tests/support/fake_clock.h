#pragma once

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace memd::test {

/// A clock the test sets and moves: simulated time, as Envoy's tests have
/// it. Nothing moves it but Advance (and, if asked, every read: see
/// TickOnEveryRead), so a deadline, a retry or a stall comes exactly when
/// the test says. Thread-safe, as clock.h promises of every Clock: pools,
/// brokers and the transfer engine read it from their own threads, and the
/// engine's threads sleep in WaitWithDeadline until Advance passes their
/// deadline. Owns nothing.
class FakeClock : public Clock {
 public:
  // Before 2043: the time is kept in quarter nanoseconds (absl::Time's
  // own resolution, so that Advance(d) reaches exactly now + d) in 64 bits.
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : now_(Quarters(start - absl::UnixEpoch())) {}

  // An atomic read: the engine reads the clock at every chunk.
  absl::Time Now() const override {
    const std::int64_t tick = tick_.load(std::memory_order_relaxed);
    return At(tick == 0 ? now_.load() : now_.fetch_add(tick));
  }

  // Returns true at once when the deadline has passed. Else it waits on
  // `cv` for a short slice of real time and returns whether the deadline
  // has passed by then: a signal, or the end of a slice, sends the caller
  // back to its condition, as any CondVar wait may (a signal that races
  // the slice's end is not lost: the caller sees its condition). So
  // Advance wakes a waiter within a slice without calling into anyone: it
  // takes no waiter's mutex and so cannot deadlock against one.
  bool WaitWithDeadline(absl::Mutex* mu, absl::CondVar* cv, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    if (Current() >= deadline) return true;
    waiters_.fetch_add(1);
    cv->WaitWithTimeout(mu, kSlice);
    waiters_.fetch_sub(1);
    return Current() >= deadline;
  }

  // By a finite, non-negative duration.
  void Advance(absl::Duration by) { now_.fetch_add(Quarters(by)); }

  // From now on every read of Now() moves the clock on by `tick` after it
  // (zero: only Advance moves it). For a test that must see time pass
  // across work it cannot step into, such as a memcpy the engine times.
  void TickOnEveryRead(absl::Duration tick) {
    tick_.store(Quarters(tick), std::memory_order_relaxed);
  }

  // Threads in WaitWithDeadline now, for a deadline still to come: how a
  // test sees that an engine thread went to sleep instead of turning. A
  // sleeper leaves for a moment at each slice's end to look at its
  // condition, so a test polls for the number, it does not read it once.
  int waiters() const { return waiters_.load(); }

 private:
  static constexpr absl::Duration kSlice = absl::Milliseconds(1);

  static absl::Duration Quarter() { return absl::Nanoseconds(1) / 4; }
  static std::int64_t Quarters(absl::Duration d) { return d / Quarter(); }
  static absl::Time At(std::int64_t quarters) { return absl::UnixEpoch() + Quarter() * quarters; }

  // The time as it stands, not moved by the read (waits look at it often).
  absl::Time Current() const { return At(now_.load()); }

  mutable std::atomic<std::int64_t> now_;  // Quarter nanoseconds since the Unix epoch.
  std::atomic<std::int64_t> tick_{0};
  mutable std::atomic<int> waiters_{0};
};

}  // namespace memd::test
