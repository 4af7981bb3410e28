#pragma once

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/pool/pool_set.h"

namespace memd::pool {

/// Gives idle memory back: every `period`, calls Trim(idle) on each pool of
/// a PoolSet. Owns its thread; borrows the pools, which must outlive it.
/// Thread-safe (Stop from any thread; idempotent).
class PeriodicTrimmer {
 public:
  PeriodicTrimmer(const PoolSet& pools, absl::Duration idle, absl::Duration period);
  ~PeriodicTrimmer();  // Stops.

  void Stop();

 private:
  void Run();

  const PoolSet& pools_;
  const absl::Duration idle_;
  const absl::Duration period_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace memd::pool
