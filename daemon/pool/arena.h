#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/segment_space.h"

namespace memd::pool {

// One size class's cache of freed blocks in one domain, and its counters
// (kept under its mutex, which the hot path holds anyway).
struct ClassCache {
  absl::Mutex mu;
  std::vector<Placement> blocks ABSL_GUARDED_BY(mu);
  std::uint64_t allocations ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t hits ABSL_GUARDED_BY(mu) = 0;  // Served from `blocks`.
};

/// Everything of one domain: its segments and their free space. Owns the
/// segments. The arena mutex guards the segments and both spaces; each class
/// cache has its own mutex, taken after the arena's when both are needed.
/// Thread-safe under those locks (each member says which it needs).
struct Arena {
  Arena(Domain domain, std::size_t classes) : domain(domain), caches(classes) {}

  const Domain domain;
  absl::Mutex mu;
  SegmentSpace small ABSL_GUARDED_BY(mu);
  SegmentSpace large ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<PoolSegment*, std::unique_ptr<PoolSegment>> segments
      ABSL_GUARDED_BY(mu);
  std::vector<ClassCache> caches;

  SegmentSpace& space(bool small_kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return small_kind ? small : large;
  }

  // Takes `segment` (all free) into the arena.
  void AdoptLocked(std::unique_ptr<PoolSegment> segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    segment->arena = this;
    segment->idle_since_ns.reset();
    space(segment->small).Add(segment.get());
    PoolSegment* raw = segment.get();
    segments.emplace(raw, std::move(segment));
  }

  // Takes `segment` into the arena with blocks already in use (`used`:
  // sorted (offset, bytes), as SegmentSpace::AddCarved takes them).
  void AdoptCarvedLocked(std::unique_ptr<PoolSegment> segment,
                         const std::vector<std::pair<std::uint64_t, std::uint64_t>>& used)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    segment->arena = this;
    segment->idle_since_ns.reset();
    space(segment->small).AddCarved(segment.get(), used);
    PoolSegment* raw = segment.get();
    segments.emplace(raw, std::move(segment));
  }

  // Returns every cached block to the small space, where it merges with its
  // neighbours. Needs mu.
  void FlushCachesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (ClassCache& cache : caches) {
      absl::MutexLock lock(&cache.mu);
      for (const Placement& block : cache.blocks) {
        small.Give(block.segment, block.offset,
                   block.segment->blocks.at(block.offset).first);
      }
      cache.blocks.clear();
    }
  }

  // Detaches `segment` (idle: no live allocation) from the arena after
  // taking its blocks out of the caches. Needs mu and every cache mutex
  // (AllCachesLock), held since the segment was found idle: otherwise a
  // cached block of it could be handed out in between.
  std::unique_ptr<PoolSegment> DetachIdleLocked(PoolSegment* segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (segment->small) {
      for (ClassCache& cache : caches) {
        auto mine = std::stable_partition(
            cache.blocks.begin(), cache.blocks.end(),
            [segment](const Placement& block) { return block.segment != segment; });
        for (auto block = mine; block != cache.blocks.end(); ++block) {
          small.Give(segment, block->offset, segment->blocks.at(block->offset).first);
        }
        cache.blocks.erase(mine, cache.blocks.end());
      }
    }
    space(segment->small).Remove(segment);
    auto owned = std::move(segments.at(segment));
    segments.erase(segment);
    owned->arena = nullptr;
    return owned;
  }

  // Whether the segment holds no live allocation. Stable while mu and every
  // cache mutex are held: every allocation and free needs one of them.
  static bool Idle(const PoolSegment& segment) {
    return segment.used.load(std::memory_order_acquire) == 0;
  }

  // Whether the segment may leave the arena (go back, or to another
  // domain): idle, and held by nobody else (PoolSegment::HeldElsewhere).
  // Stable under the same locks as Idle: an idle segment gains no holders.
  static bool Releasable(const PoolSegment& segment) {
    return Idle(segment) && !segment.HeldElsewhere();
  }
};

// Locks every cache of an arena (after its mu): no allocation can then
// start or end in its small segments.
class AllCachesLock {
 public:
  explicit AllCachesLock(Arena& arena) : arena_(arena) {
    for (ClassCache& cache : arena_.caches) cache.mu.Lock();
  }
  ~AllCachesLock() {
    for (ClassCache& cache : arena_.caches) cache.mu.Unlock();
  }
  AllCachesLock(const AllCachesLock&) = delete;
  AllCachesLock& operator=(const AllCachesLock&) = delete;

 private:
  Arena& arena_;
};

}  // namespace memd::pool
