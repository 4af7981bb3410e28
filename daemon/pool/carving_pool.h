#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/arenas.h"
#include "daemon/pool/idle_budget.h"
#include "daemon/pool/limited_backend.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/segment_journal.h"
#include "daemon/pool/segment_space.h"
#include "daemon/pool/size_classes.h"

namespace memd::pool {

struct CarvingPoolOptions {
  // Most bytes the pool may hold from the backend (LimitedBackend).
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
  // Told of every segment the pool reserves (SegmentAdded, under the arena
  // mutex of the domain it joins, before any of it is handed out), moves to
  // another domain (SegmentChanged, under the new arena's mutex, before any
  // of it is handed out there) and gives back (SegmentRemoved, with no pool
  // lock held, after the pool dropped it). Not told of adopted segments
  // (Pool::Adopt: already recorded) nor of the segments a destroyed pool
  // drops (memd stopping is not memd giving memory back; the journal's
  // owner decides what a stop keeps). Borrowed: must outlive the pool; must
  // be thread-safe. Null: nobody is told.
  SegmentJournal* journal = nullptr;
};

/// The pool engine: reserves segments from a backend and carves them.
///
/// - Small requests: size classes (SizeClasses), each with a free-list cache
///   per domain; a hit pops a block under that class's own mutex — no
///   global lock. An empty cache carves a block from the domain's small
///   segments by best fit.
/// - Large requests: best fit over the domain's large segments, splitting
///   the block; frees merge with address-ordered free neighbours at once.
/// - Domains: every segment serves one Domain (an Arena per domain,
///   arena.h). With scrub_between_domains, an idle segment moves to another
///   domain only after Backend::Scrub zeroed it (counted in scrubbed_bytes).
/// - Limits: the pool reserves through a LimitedBackend; at limit_bytes the
///   pool first trims idle segments, then fails with RESOURCE_EXHAUSTED and
///   the numbers.
/// - Growth: IdleBudget decides which idle segments go back before a
///   segment is reserved.
/// - Trim: segments idle (no live allocation, unused) for a while go back to
///   the backend: Trim(min_idle), called periodically by the daemon and on
///   demand. Cached size-class blocks do not keep a segment alive. Finding
///   and detaching idle segments: idle_segments.h.
/// - Held segments: an idle segment whose backing someone else still holds
///   (a SegmentHold: the broker, for a session that received its legacy IPC
///   handle) is neither given back (trim, idle budget, limit) nor moved to
///   another domain; it stays reserved, and its own domain may use it,
///   until let go.
///
/// - Adoption (Adopt): a segment an earlier memd reserved comes back with
///   its live allocations. The pool then agrees exactly with the one before
///   on reserved and used bytes, segment count, each segment's live blocks
///   and free bytes, and for large segments the free blocks themselves
///   (frees merge at once, so a large segment's free blocks are always the
///   gaps between live ones). Freed small blocks that sat in size-class
///   caches are not recorded: they come back merged into carvable free
///   space, so largest_free_bytes (and fragmentation) may be larger than
///   before, never smaller, and `cached` is 0. History is not recorded
///   either: peaks start at what was adopted, hit, miss, scrub, trim and
///   limit counters at 0, and a class's `allocations` at its adopted live
///   allocations.
///
/// Owns its segments; borrows the backend and the clock, which must outlive
/// it. Every allocation must be freed before the pool is destroyed.
/// Thread-safe: counters are atomics; the hot path takes one size class's
/// mutex. Errors: see Pool.
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
  // See the class comment ("Adoption") and Pool::Adopt. Meant for recovery,
  // before the pool serves: it is thread-safe, but a segment the pool
  // reserves while ids are being adopted may take an id not yet adopted.
  absl::StatusOr<std::vector<Allocation>> Adopt(AdoptedSegment segment) override;

  const SizeClasses& size_classes() const { return classes_; }

 private:
  absl::StatusOr<Allocation> AllocateSmall(Arena& arena, std::size_t size_class);
  absl::StatusOr<Allocation> AllocateLarge(Arena& arena, std::uint64_t bytes);
  // The carve step: accounts for `bytes` placed at `block` and makes the
  // allocation. The caller counts the hit or miss.
  Allocation Carve(const Placement& block, std::uint64_t bytes,
                   const Domain& domain);
  // Gives the arena a new segment able to hold `bytes`: an idle segment of
  // another domain, scrubbed (when allowed), else one from the backend.
  // Returns whether the backend was asked (a miss).
  absl::StatusOr<bool> Grow(Arena& arena, bool small, std::uint64_t bytes);
  // An idle segment of another domain, scrubbed, or nullptr.
  std::unique_ptr<PoolSegment> TakeScrubbed(const Arena& thief, bool small,
                                            std::uint64_t bytes);
  // Reserves from the limited backend (on `numa_node`, the arena's, when
  // >= 0), trimming idle segments and trying once more when it is out of
  // room.
  absl::StatusOr<std::shared_ptr<backend::Segment>> Reserve(std::uint64_t bytes,
                                                            int numa_node);
  // Gives back idle segments, largest first, until reserving `bytes` more
  // keeps the pool within the idle budget.
  void KeepIdleWithinBudget(std::uint64_t bytes);
  // Discards detached segments and gives them back (by dropping them).
  void Release(std::vector<std::unique_ptr<PoolSegment>> segments);
  std::string LimitMessage(const absl::Status& refusal) const;
  // What the journal records of `segment`, serving `domain`.
  SegmentRecord RecordOf(const PoolSegment& segment, const Domain& domain) const;
  // INVALID_ARGUMENT unless `live` (sorted by offset) fits a segment of
  // `size` (small: carved by size classes) as allocations of this pool.
  absl::Status CheckLive(std::uint64_t id, std::uint64_t size, bool small,
                         const std::vector<std::pair<std::uint64_t, std::uint64_t>>& live) const;
  // Whether a segment numbered `id` is in any arena.
  bool HasSegment(std::uint64_t id) const;

  LimitedBackend backend_;
  const Location location_;
  const std::uint64_t alignment_;
  const CarvingPoolOptions options_;
  const std::uint64_t small_segment_bytes_;
  const std::uint64_t large_round_bytes_;
  const Clock& clock_;
  const SizeClasses classes_;
  Arenas arenas_;
  IdleBudget idle_budget_;

  // Lock-free counters; reserved bytes, their peak and the segments are
  // counted by backend_.
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_used_{0};
  // Hits of the slow paths; cache hits are counted in each class cache.
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
  std::atomic<std::uint64_t> scrubbed_{0};
  std::atomic<std::uint64_t> trimmed_{0};
  std::atomic<std::uint64_t> limit_rejections_{0};

  // One adoption at a time: the id check and the insertion are one step.
  absl::Mutex adopt_mu_;
};

}  // namespace memd::pool
