#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/segment_space.h"
#include "daemon/pool/size_classes.h"

namespace memd::pool {

struct CarvingPoolOptions {
  // Most bytes the pool may hold from the backend.
  std::uint64_t limit_bytes = ~std::uint64_t{0};
  // Requests up to this size are small: served by size classes carved from
  // small segments. Larger ones are carved by best fit from large segments.
  std::uint64_t small_max_bytes = std::uint64_t{1} << 20;
  // Growth policy. A small miss reserves a segment of this size (rounded up
  // to the alignment, at least small_max_bytes); a large miss reserves the
  // request rounded up to large_round_bytes (0: the alignment).
  std::uint64_t small_segment_bytes = std::uint64_t{2} << 20;
  std::uint64_t large_round_bytes = 0;
  // A large request takes a free block at most this much larger than itself
  // (0.5: 50%); bigger blocks stay whole for requests their size, so that
  // segments do not fill with remnants that keep them from going back.
  double large_fit_slack = 0.5;
  // Before reserving a segment, idle segments are given back until the pool
  // would hold at most (1 + idle_budget) times the most ever in use (or
  // what is in use with the new allocation, if more): freed memory is kept
  // for reuse, but the pool does not grow far past its peak demand for
  // lack of a block that fits. Negative: keep every idle segment (until the
  // limit or trim).
  double idle_budget = 0.08;
  // Whether an idle segment of one domain may serve another after it is
  // scrubbed. Off by default: a client may keep a mapping of memory after
  // its lease ends (libmemd caches mappings), and no scrub can revoke it.
  bool scrub_between_domains = false;
};

/// The pool engine: reserves segments from a backend and carves them.
///
/// - Small requests: size classes (SizeClasses), each with a free-list cache
///   per domain; a hit pops a block under that class's own mutex — no
///   global lock. An empty cache carves a block from the domain's small
///   segments by best fit.
/// - Large requests: best fit over the domain's large segments, splitting
///   the block; frees merge with address-ordered free neighbours at once.
/// - Domains: every segment serves one Domain (SegmentSpace per domain).
///   With scrub_between_domains, an idle segment moves to another domain
///   only after Backend::Scrub zeroed it (counted in scrubbed_bytes).
/// - Limits: at limit_bytes the pool first trims idle segments, then fails
///   with RESOURCE_EXHAUSTED and the numbers.
/// - Trim: segments idle (no live allocation, unused) for a while go back to
///   the backend: Trim(min_idle), called periodically by the daemon and on
///   demand. Cached size-class blocks do not keep a segment alive.
/// - Held segments: an idle segment whose backing someone else still holds
///   (the broker, for a session that received its legacy IPC handle) is
///   neither given back (trim, idle budget, limit) nor moved to another
///   domain; it stays reserved, and its own domain may use it, until let go.
///
/// Owns its segments; borrows the backend and the clock, which must outlive
/// it. Every allocation must be freed before the pool is destroyed.
/// Thread-safe. Errors: see Pool.
class CarvingPool : public Pool {
 public:
  CarvingPool(backend::Backend& backend, Location location,
              CarvingPoolOptions options, const Clock& clock);
  ~CarvingPool() override;

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return alignment_; }
  absl::StatusOr<Allocation> Allocate(std::uint64_t bytes, Domain domain) override;
  // The request's size class, or for large ones the request aligned.
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override;
  void Free(Allocation allocation) override;
  std::uint64_t Trim(absl::Duration min_idle) override;
  PoolStats Stats() const override;

  const SizeClasses& size_classes() const { return classes_; }

 private:
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<Domain, std::unique_ptr<Arena>> arenas ABSL_GUARDED_BY(mu);
  };
  static constexpr std::size_t kShards = 16;

  Arena& ArenaFor(const Domain& domain);
  std::vector<Arena*> AllArenas() const;

  absl::StatusOr<Allocation> AllocateSmall(Arena& arena, std::size_t size_class);
  absl::StatusOr<Allocation> AllocateLarge(Arena& arena, std::uint64_t bytes);
  // Gives the arena a new segment able to hold `bytes`: an idle segment of
  // another domain, scrubbed (when allowed), else one from the backend.
  // Returns whether the backend was asked (a miss).
  absl::StatusOr<bool> Grow(Arena& arena, bool small, std::uint64_t bytes);
  absl::StatusOr<std::shared_ptr<backend::Segment>> Reserve(std::uint64_t bytes);
  // Gives back idle segments, largest first, until reserving `bytes` more
  // keeps the pool within the idle budget.
  void KeepIdleWithinBudget(std::uint64_t bytes);
  // An idle segment seen in a scan: values only, since it may be gone by
  // the time they are read.
  struct IdleSegment {
    Arena* arena;
    PoolSegment* segment;  // Compared, never followed, until confirmed.
    std::uint64_t size;
    std::uint64_t seq;
  };
  // Detaches (from every arena) the idle segments `choose` picks among all
  // idle ones nobody else holds; `choose` runs with no lock held.
  // `saw_held`: whether idle segments held elsewhere were passed over.
  std::vector<std::unique_ptr<PoolSegment>> DetachIdle(
      const std::function<std::vector<IdleSegment>(std::vector<IdleSegment>)>& choose,
      bool* saw_held);
  std::unique_ptr<PoolSegment> StealIdle(Arena& thief, bool small,
                                         std::uint64_t bytes);
  Allocation Make(const Placement& placement, std::uint64_t bytes,
                  const Domain& domain);
  // Accounts for a block just carved by best fit (a hit, or a miss when a
  // segment had to be reserved for it) and makes the allocation.
  Allocation Carved(const Placement& block, std::uint64_t bytes,
                    const Domain& domain, bool missed);
  void Release(std::vector<std::unique_ptr<PoolSegment>> segments);
  void NoteUsed(std::uint64_t bytes);
  // Bytes of idle segments that stay because someone else holds them
  // (PoolSegment::HeldElsewhere); for messages.
  std::uint64_t HeldIdleBytes() const;
  std::string LimitMessage(std::uint64_t bytes) const;

  backend::Backend& backend_;
  const Location location_;
  const std::uint64_t alignment_;
  const CarvingPoolOptions options_;
  const std::uint64_t small_segment_bytes_;
  const std::uint64_t large_round_bytes_;
  const Clock& clock_;
  const SizeClasses classes_;
  // Tells a thread's cached arena lookup which pool it belongs to.
  const std::uint64_t instance_;

  mutable Shard shards_[kShards];

  // Reservations are checked against the limit under this mutex; reads of
  // the counters are lock-free.
  absl::Mutex reserve_mu_;
  std::atomic<std::uint64_t> reserved_{0};
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_reserved_{0};
  std::atomic<std::uint64_t> peak_used_{0};
  // Hits of the slow paths; cache hits are counted in each class cache.
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
  std::atomic<std::uint64_t> segments_{0};
  std::atomic<std::uint64_t> scrubbed_{0};
  std::atomic<std::uint64_t> trimmed_{0};
  std::atomic<std::uint64_t> limit_rejections_{0};
  // Counts segments going idle, so that the idle budget skips its scan when
  // no segment went idle since one that found none.
  std::atomic<std::uint64_t> idle_events_{0};
  std::atomic<std::uint64_t> idle_events_seen_{~std::uint64_t{0}};
};

}  // namespace memd::pool
