#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::pool {

struct SegmentCacheOptions {
  // Most bytes the pool may hold from the backend (live plus cached).
  std::uint64_t limit_bytes = 0;
  // Most bytes of freed segments kept for reuse; beyond it they go back.
  std::uint64_t max_cached_bytes = 0;
};

/// The first, simple pool: one backend segment per allocation, and freed
/// segments cached per (domain, size) for the next allocation of that size.
/// Owns its cached segments; borrows the backend, which must outlive it.
/// Thread-safe (one mutex; the backend is called without it held).
/// Errors: see Pool.
class SegmentCachePool : public Pool {
 public:
  SegmentCachePool(backend::Backend& backend, Location location,
                   SegmentCacheOptions options);

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return alignment_; }
  absl::StatusOr<Allocation> Allocate(std::uint64_t bytes,
                                      Domain domain) override;
  void Free(Allocation allocation) override;
  std::uint64_t Trim(absl::Duration min_idle) override;
  PoolStats Stats() const override;

 private:
  struct CacheKey {
    Domain domain;
    std::uint64_t bytes;
    friend bool operator==(const CacheKey&, const CacheKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const CacheKey& key) {
      return H::combine(std::move(h), key.domain, key.bytes);
    }
  };

  // Drops cached segments until `needed` more bytes fit under the limit or
  // the cache is empty; returns the segments to destroy outside the lock.
  std::vector<std::shared_ptr<backend::Segment>> EvictForLocked(
      std::uint64_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  backend::Backend& backend_;
  const Location location_;
  const std::uint64_t alignment_;
  const SegmentCacheOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<CacheKey, std::vector<std::shared_ptr<backend::Segment>>>
      cache_ ABSL_GUARDED_BY(mu_);
  std::uint64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Reserved bytes include segments being reserved right now, so that two
  // concurrent misses cannot both pass the limit.
  std::uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t segments_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace memd::pool
