#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::test {

/// A pool whose statistics a test writes, so that what the metrics show
/// does not depend on how a real pool counts. Allocations are real (one
/// backend segment each) so that a broker can hand out buffers from it.
/// Counts Stats() calls; each call may first change the figures (`on_stats`)
/// to model a pool that moves between two reads. Thread-safe.
class ScriptedPool : public pool::Pool {
 public:
  ScriptedPool(backend::Backend& backend, Location location, pool::PoolStats stats)
      : backend_(backend), location_(location), stats_(std::move(stats)) {
    stats_.location = location;
  }

  // Runs under the pool's lock before each Stats() answers.
  void set_on_stats(std::function<void(pool::PoolStats&)> on_stats) {
    absl::MutexLock lock(&mu_);
    on_stats_ = std::move(on_stats);
  }
  int stats_calls() const { return stats_calls_.load(); }

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return backend_.alignment(location_); }
  absl::StatusOr<pool::Allocation> Allocate(std::uint64_t bytes,
                                            pool::Domain domain) override {
    const std::uint64_t rounded = AllocationBytes(bytes);
    auto segment = backend_.Reserve(location_, rounded);
    if (!segment.ok()) return segment.status();
    pool::Allocation allocation;
    Attach(allocation, std::move(*segment));
    allocation.segment_id = ++next_id_;
    allocation.bytes = rounded;
    allocation.domain = domain;
    allocation.id = allocation.segment_id;
    return allocation;
  }
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override {
    const std::uint64_t align = alignment();
    return (bytes + align - 1) / align * align;
  }
  void Free(pool::Allocation) override {}
  std::uint64_t Trim(absl::Duration) override { return 0; }
  pool::PoolStats Stats() const override {
    absl::MutexLock lock(&mu_);
    ++stats_calls_;
    if (on_stats_) on_stats_(stats_);
    return stats_;
  }

 private:
  backend::Backend& backend_;
  const Location location_;
  mutable absl::Mutex mu_;
  mutable pool::PoolStats stats_ ABSL_GUARDED_BY(mu_);
  std::function<void(pool::PoolStats&)> on_stats_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<int> stats_calls_{0};
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace memd::test
