#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace memd::transfer {

/// A flag a progress thread sleeps on: Submit, Cancel and the driver's
/// WakeWhenDone callbacks raise it. Shared with those callbacks so that a
/// late one never touches freed memory. Thread-safe; Wake never waits for
/// more than the flag's mutex.
class Waker {
 public:
  void Wake() {
    absl::MutexLock lock(&mu_);
    woken_ = true;
    cv_.Signal();
  }
  // Returns when woken (and lowers the flag) or when `clock` reaches
  // `until`: the engine's clock, so that a test's fake clock ends the nap.
  void WaitUntil(const Clock& clock, absl::Time until) {
    absl::MutexLock lock(&mu_);
    while (!woken_) {
      if (clock.WaitWithDeadline(&mu_, &cv_, until)) break;
    }
    woken_ = false;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

/// One progress thread of the engine (host copies, or one device's
/// pipelines). Owns the thread; Stop asks it to finish what it holds and
/// joins it. Wake and Stop are thread-safe.
class Lane {
 public:
  virtual ~Lane() = default;

  void Start() { thread_ = std::thread([this] { Run(); }); }
  void Wake() { waker_->Wake(); }
  // Run returns once stopping() and the lane has nothing left.
  void Stop() {
    stopping_.store(true);
    Wake();
    if (thread_.joinable()) thread_.join();
  }

 protected:
  virtual void Run() = 0;
  bool stopping() const { return stopping_.load(); }
  const std::shared_ptr<Waker>& waker() const { return waker_; }

 private:
  std::shared_ptr<Waker> waker_ = std::make_shared<Waker>();
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace memd::transfer
