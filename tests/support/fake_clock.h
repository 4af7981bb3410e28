#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace memd::test {

/// A clock the test sets and moves. Thread-safe, as clock.h promises of
/// every Clock: pools and brokers read it from their own threads.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }

  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::test
