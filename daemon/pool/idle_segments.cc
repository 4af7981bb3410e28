#include "daemon/pool/idle_segments.h"

#include <utility>

namespace memd::pool {

std::vector<std::unique_ptr<PoolSegment>> DetachIdle(const std::vector<Arena*>& arenas,
                                                     const IdleChooser& choose,
                                                     bool* saw_held) {
  // A first look without the cache locks: candidates only, copied out (the
  // segments may go while `choose` runs), each confirmed under every lock
  // below before it is detached.
  std::vector<IdleSegment> idle;
  *saw_held = false;
  for (Arena* arena : arenas) {
    absl::MutexLock lock(&arena->mu);
    for (auto& [raw, owned] : arena->segments) {
      if (!Arena::Idle(*raw)) continue;
      if (raw->HeldElsewhere()) {
        *saw_held = true;
        continue;
      }
      idle.push_back({arena, raw, raw->size, raw->seq});
    }
  }
  std::vector<std::unique_ptr<PoolSegment>> detached;
  if (idle.empty()) return detached;
  for (const IdleSegment& candidate : choose(std::move(idle))) {
    // Look again: it may have been used, moved or freed since. Arenas live
    // as long as the pool; a segment is only touched once its arena is
    // seen to hold it, and `seq` (never reused) tells it from a newer one
    // at the same address.
    Arena* arena = candidate.arena;
    absl::MutexLock lock(&arena->mu);
    if (!arena->segments.contains(candidate.segment) ||
        candidate.segment->seq != candidate.seq) {
      continue;
    }
    AllCachesLock caches(*arena);
    if (Arena::Releasable(*candidate.segment)) {
      detached.push_back(arena->DetachIdleLocked(candidate.segment));
    }
  }
  return detached;
}

std::vector<std::unique_ptr<PoolSegment>> DetachIdleFor(const std::vector<Arena*>& arenas,
                                                        std::int64_t now_ns,
                                                        std::int64_t min_idle_ns) {
  std::vector<std::unique_ptr<PoolSegment>> detached;
  for (Arena* arena : arenas) {
    absl::MutexLock lock(&arena->mu);
    AllCachesLock caches(*arena);
    std::vector<PoolSegment*> due;
    for (auto& [raw, owned] : arena->segments) {
      const bool touched = raw->touched.exchange(false, std::memory_order_relaxed);
      if (!Arena::Idle(*raw) || touched) {
        raw->idle_since_ns.reset();
        if (min_idle_ns > 0) continue;
        if (!Arena::Idle(*raw)) continue;
      }
      if (!raw->idle_since_ns) raw->idle_since_ns = now_ns;
      // Held, it keeps its idle time and goes at the first look once let
      // go.
      if (now_ns - *raw->idle_since_ns >= min_idle_ns && !raw->HeldElsewhere()) {
        due.push_back(raw);
      }
    }
    for (PoolSegment* segment : due) {
      detached.push_back(arena->DetachIdleLocked(segment));
    }
  }
  return detached;
}

std::unique_ptr<PoolSegment> StealIdle(const std::vector<Arena*>& arenas,
                                       const Arena& thief, bool small,
                                       std::uint64_t bytes) {
  for (Arena* victim : arenas) {
    // Pages stay on the node they were placed on: only a domain of the
    // same node (or of none) may take them.
    if (victim == &thief || victim->domain.numa_node != thief.domain.numa_node) continue;
    absl::MutexLock lock(&victim->mu);
    AllCachesLock caches(*victim);
    PoolSegment* best = nullptr;
    for (auto& [raw, owned] : victim->segments) {
      if (raw->small != small || raw->size < bytes || !Arena::Releasable(*raw)) {
        continue;
      }
      if (best == nullptr || raw->size < best->size ||
          (raw->size == best->size && raw->seq < best->seq)) {
        best = raw;
      }
    }
    if (best != nullptr) return victim->DetachIdleLocked(best);
  }
  return nullptr;
}

std::uint64_t HeldIdleBytes(const std::vector<Arena*>& arenas) {
  std::uint64_t bytes = 0;
  for (Arena* arena : arenas) {
    absl::MutexLock lock(&arena->mu);
    for (auto& [raw, owned] : arena->segments) {
      if (Arena::Idle(*raw) && raw->HeldElsewhere()) bytes += raw->size;
    }
  }
  return bytes;
}

}  // namespace memd::pool
