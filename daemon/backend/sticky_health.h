#pragma once

#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace memd::backend {

/// The first sticky error a GPU's copy side met (a broken CUDA context, a
/// lost Level Zero device), kept for good: every later call returns it
/// without asking the driver again. Thread-safe; while the device is
/// healthy, status() takes no lock (every copy and poll asks).
class StickyHealth {
 public:
  absl::Status status() const {
    if (!broken_.load(std::memory_order_acquire)) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    return status_;
  }

  // Keeps `error` (not OK) unless an error is kept already.
  void Break(absl::Status error) {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return;
    status_ = std::move(error);
    broken_.store(true, std::memory_order_release);
  }

 private:
  std::atomic<bool> broken_{false};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::backend
