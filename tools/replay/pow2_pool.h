#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::replay {

/// The textbook baseline a pool must beat: every request is rounded up to a
/// power of two (at least the alignment) and served by one segment of that
/// size; freed segments wait on a free list per (domain, size) for the next
/// request of that size. Nothing is ever split or coalesced. At the limit
/// it gives back cached segments, largest first, until the request fits.
/// Owns its cached segments; borrows the backend, which must outlive it.
/// Thread-safe (one mutex; the backend is called without it held).
/// Errors: see pool::Pool.
class Pow2Pool : public pool::Pool {
 public:
  Pow2Pool(backend::Backend& backend, Location location, std::uint64_t limit_bytes);

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return alignment_; }
  absl::StatusOr<pool::Allocation> Allocate(std::uint64_t bytes,
                                            pool::Domain domain) override;
  // The power of two (at least the alignment) that serves `bytes`.
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override;
  void Free(pool::Allocation allocation) override;
  std::uint64_t Trim(absl::Duration min_idle) override;
  pool::PoolStats Stats() const override;

 private:
  struct CacheKey {
    pool::Domain domain;
    std::uint64_t bytes;
    friend bool operator==(const CacheKey&, const CacheKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const CacheKey& key) {
      return H::combine(std::move(h), key.domain, key.bytes);
    }
  };
  struct Cached {
    std::shared_ptr<backend::Segment> segment;
    absl::Time freed_at;
  };
  // Per block size, over all domains.
  struct SizeCounts {
    std::uint64_t allocations = 0;
    std::uint64_t cached = 0;
  };

  // Takes cached segments off the lists, largest first, until `needed`
  // more bytes fit under the limit. The caller has checked that they can.
  std::vector<std::shared_ptr<backend::Segment>> EvictLocked(std::uint64_t needed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a cached segment of `bytes` as given back to the backend.
  void DropCachedLocked(std::uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pool::Allocation UseLocked(std::shared_ptr<backend::Segment> segment,
                             std::uint64_t bytes, const pool::Domain& domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  backend::Backend& backend_;
  const Location location_;
  const std::uint64_t alignment_;
  const std::uint64_t limit_bytes_;

  mutable absl::Mutex mu_;
  // Each list is LIFO: the back was freed last.
  absl::flat_hash_map<CacheKey, std::vector<Cached>> cache_ ABSL_GUARDED_BY(mu_);
  std::map<std::uint64_t, SizeCounts> sizes_ ABSL_GUARDED_BY(mu_);
  // Includes segments being reserved right now, so that two concurrent
  // misses cannot both pass the limit.
  std::uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t peak_reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t peak_used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t segments_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t trimmed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace memd::replay
