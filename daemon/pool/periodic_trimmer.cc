#include "daemon/pool/periodic_trimmer.h"

namespace memd::pool {

PeriodicTrimmer::PeriodicTrimmer(const PoolSet& pools, absl::Duration idle,
                                 absl::Duration period)
    : pools_(pools), idle_(idle), period_(period), thread_([this] { Run(); }) {}

PeriodicTrimmer::~PeriodicTrimmer() { Stop(); }

void PeriodicTrimmer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PeriodicTrimmer::Run() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    // Wakes early only to stop.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period_);
    if (stopping_) return;
    mu_.Unlock();
    pools_.Trim(idle_);
    mu_.Lock();
  }
}

}  // namespace memd::pool
