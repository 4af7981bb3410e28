#include "daemon/pool/carving_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"

namespace memd::pool {

// One size class's cache of freed blocks in one domain, and its counters
// (kept under its mutex, which the hot path holds anyway).
struct ClassCache {
  absl::Mutex mu;
  std::vector<Placement> blocks ABSL_GUARDED_BY(mu);
  std::uint64_t allocations ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t hits ABSL_GUARDED_BY(mu) = 0;  // Served from `blocks`.
};

/// Everything of one domain: its segments and their free space. The arena
/// mutex guards the segments and both spaces; each class cache has its own
/// mutex, taken after the arena's when both are needed.
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

namespace {

std::atomic<std::uint64_t> next_instance{1};
// Segment numbers, shared by every pool so that they name a segment in the
// whole daemon (clients cache device imports by them).
std::atomic<std::uint64_t> next_segment_seq{1};

// The last arena a thread used, so that the hot path skips the shard lock.
struct ArenaCache {
  std::uint64_t instance = 0;
  Domain domain;
  Arena* arena = nullptr;
};
thread_local ArenaCache tls_arena;

void RaisePeak(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen &&
         !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

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

 private:
  Arena& arena_;
};

}  // namespace

CarvingPool::CarvingPool(backend::Backend& backend, Location location,
                         CarvingPoolOptions options, const Clock& clock)
    : backend_(backend),
      location_(location),
      alignment_(backend.alignment(location)),
      options_(options),
      small_segment_bytes_(AlignUp(
          std::max(options.small_segment_bytes,
                   AlignUp(std::max<std::uint64_t>(options.small_max_bytes, 1),
                           backend.alignment(location))),
          backend.alignment(location))),
      large_round_bytes_(std::max(options.large_round_bytes,
                                  backend.alignment(location))),
      clock_(clock),
      classes_(alignment_, options.small_max_bytes),
      instance_(next_instance.fetch_add(1)) {}

CarvingPool::~CarvingPool() = default;

Arena& CarvingPool::ArenaFor(const Domain& domain) {
  ArenaCache& cached = tls_arena;
  if (cached.instance == instance_ && cached.domain == domain) return *cached.arena;
  Shard& shard = shards_[absl::Hash<Domain>{}(domain) % kShards];
  Arena* arena;
  {
    absl::MutexLock lock(&shard.mu);
    std::unique_ptr<Arena>& slot = shard.arenas[domain];
    if (slot == nullptr) slot = std::make_unique<Arena>(domain, classes_.count());
    arena = slot.get();
  }
  cached = ArenaCache{instance_, domain, arena};
  return *arena;
}

std::vector<Arena*> CarvingPool::AllArenas() const {
  std::vector<Arena*> arenas;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (auto& [domain, arena] : shard.arenas) arenas.push_back(arena.get());
  }
  return arenas;
}

absl::StatusOr<Allocation> CarvingPool::Allocate(std::uint64_t bytes,
                                                 Domain domain) {
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  if (aligned == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows"));
  }
  Arena& arena = ArenaFor(domain);
  if (aligned <= classes_.max_bytes()) {
    return AllocateSmall(arena, classes_.ClassOf(aligned));
  }
  return AllocateLarge(arena, aligned);
}

std::uint64_t CarvingPool::AllocationBytes(std::uint64_t bytes) const {
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  if (bytes == 0 || aligned == 0) return bytes;
  // As Allocate: AllocateSmall hands out whole blocks of the class.
  if (aligned <= classes_.max_bytes()) return classes_.bytes(classes_.ClassOf(aligned));
  return aligned;
}

Allocation CarvingPool::Make(const Placement& placement, std::uint64_t bytes,
                             const Domain& domain) {
  Allocation allocation;
  allocation.segment = placement.segment->backing;
  allocation.segment_id = placement.segment->seq;
  allocation.offset = placement.offset;
  allocation.bytes = bytes;
  allocation.domain = domain;
  // Unique among live allocations without a shared counter: no two live
  // blocks share a segment and offset.
  allocation.id = (placement.segment->seq << 40) | (placement.offset / alignment_);
  allocation.internal = reinterpret_cast<std::uintptr_t>(placement.segment);
  return allocation;
}

Allocation CarvingPool::Carved(const Placement& block, std::uint64_t bytes,
                               const Domain& domain, bool missed) {
  block.segment->used.fetch_add(bytes, std::memory_order_relaxed);
  block.segment->touched.store(true, std::memory_order_relaxed);
  (missed ? misses_ : hits_).fetch_add(1, std::memory_order_relaxed);
  NoteUsed(bytes);
  return Make(block, bytes, domain);
}

void CarvingPool::NoteUsed(std::uint64_t bytes) {
  RaisePeak(peak_used_, used_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

absl::StatusOr<Allocation> CarvingPool::AllocateSmall(Arena& arena,
                                                      std::size_t size_class) {
  const std::uint64_t bytes = classes_.bytes(size_class);
  ClassCache& cache = arena.caches[size_class];
  // The hot path: a cached block of this class, under this class's lock.
  {
    absl::MutexLock lock(&cache.mu);
    if (!cache.blocks.empty()) {
      Placement block = cache.blocks.back();
      cache.blocks.pop_back();
      ++cache.allocations;
      ++cache.hits;
      block.segment->used.fetch_add(bytes, std::memory_order_relaxed);
      block.segment->touched.store(true, std::memory_order_relaxed);
      NoteUsed(bytes);
      return Make(block, bytes, arena.domain);
    }
  }
  bool missed = false;
  for (int round = 0;; ++round) {
    {
      absl::MutexLock lock(&arena.mu);
      std::optional<Placement> block = arena.small.Take(bytes);
      if (!block && round == 0) {
        // Memory parked in other classes' caches may fit once merged.
        arena.FlushCachesLocked();
        block = arena.small.Take(bytes);
      }
      if (block) {
        // Under the cache lock, so that trim (holding every cache lock)
        // sees a consistent `used`.
        absl::MutexLock cache_lock(&cache.mu);
        ++cache.allocations;
        return Carved(*block, bytes, arena.domain, missed);
      }
    }
    // Other threads may take the new segment's space first; each round
    // adds one, so give up only on something unexpected.
    if (round > 64) {
      return absl::InternalError("could not place a small block in new segments");
    }
    MEMD_ASSIGN_OR_RETURN(bool reserved, Grow(arena, /*small=*/true, bytes));
    missed = missed || reserved;
  }
}

absl::StatusOr<Allocation> CarvingPool::AllocateLarge(Arena& arena,
                                                      std::uint64_t bytes) {
  const double limit = static_cast<double>(bytes) * (1.0 + options_.large_fit_slack);
  const std::uint64_t max_block =
      limit >= 1.8e19 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(limit);
  bool missed = false;
  for (int round = 0;; ++round) {
    {
      absl::MutexLock lock(&arena.mu);
      if (std::optional<Placement> block = arena.large.Take(bytes, max_block)) {
        return Carved(*block, bytes, arena.domain, missed);
      }
    }
    if (round > 64) {
      return absl::InternalError("could not place a large block in new segments");
    }
    MEMD_ASSIGN_OR_RETURN(bool reserved, Grow(arena, /*small=*/false, bytes));
    missed = missed || reserved;
  }
}

void CarvingPool::Free(Allocation allocation) {
  auto* segment = reinterpret_cast<PoolSegment*>(allocation.internal);
  Arena& arena = *segment->arena;
  const std::uint64_t bytes = allocation.bytes;
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  if (segment->small) {
    ClassCache& cache = arena.caches[classes_.ClassOf(bytes)];
    absl::MutexLock lock(&cache.mu);
    cache.blocks.push_back(Placement{segment, allocation.offset});
    if (segment->used.fetch_sub(bytes, std::memory_order_release) == bytes) {
      idle_events_.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  absl::MutexLock lock(&arena.mu);
  arena.large.Give(segment, allocation.offset, bytes);
  if (segment->used.fetch_sub(bytes, std::memory_order_release) == bytes) {
    idle_events_.fetch_add(1, std::memory_order_relaxed);
  }
}

absl::StatusOr<bool> CarvingPool::Grow(Arena& arena, bool small,
                                       std::uint64_t bytes) {
  const std::uint64_t size =
      small ? small_segment_bytes_ : AlignUp(bytes, large_round_bytes_);
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows"));
  }
  std::unique_ptr<PoolSegment> segment;
  bool reserved = false;
  if (options_.scrub_between_domains) {
    segment = StealIdle(arena, small, size);
    if (segment != nullptr) {
      absl::Status scrubbed = segment->backing->Scrub();
      if (scrubbed.ok()) {
        scrubbed_.fetch_add(segment->size, std::memory_order_relaxed);
      } else {
        // Not reusable across domains after all: give it back.
        std::vector<std::unique_ptr<PoolSegment>> unusable;
        unusable.push_back(std::move(segment));
        Release(std::move(unusable));
      }
    }
  }
  if (segment == nullptr) {
    KeepIdleWithinBudget(size);
    MEMD_ASSIGN_OR_RETURN(std::shared_ptr<backend::Segment> backing, Reserve(size));
    segment = std::make_unique<PoolSegment>(
        std::move(backing), size, small, next_segment_seq.fetch_add(1));
    segments_.fetch_add(1, std::memory_order_relaxed);
    reserved = true;
  }
  absl::MutexLock lock(&arena.mu);
  segment->arena = &arena;
  segment->idle_since_ns.reset();
  arena.space(small).Add(segment.get());
  PoolSegment* raw = segment.get();
  arena.segments.emplace(raw, std::move(segment));
  return reserved;
}

std::unique_ptr<PoolSegment> CarvingPool::StealIdle(Arena& thief, bool small,
                                                    std::uint64_t bytes) {
  for (Arena* victim : AllArenas()) {
    if (victim == &thief) continue;
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

absl::StatusOr<std::shared_ptr<backend::Segment>> CarvingPool::Reserve(
    std::uint64_t bytes) {
  for (int attempt = 0;; ++attempt) {
    bool room = false;
    {
      absl::MutexLock lock(&reserve_mu_);
      const std::uint64_t reserved = reserved_.load(std::memory_order_relaxed);
      if (reserved + bytes >= reserved && reserved + bytes <= options_.limit_bytes) {
        reserved_.store(reserved + bytes, std::memory_order_relaxed);
        RaisePeak(peak_reserved_, reserved + bytes);
        room = true;
      }
    }
    if (room) {
      auto segment = backend_.Reserve(location_, bytes);
      if (segment.ok()) return std::shared_ptr<backend::Segment>(std::move(*segment));
      {
        absl::MutexLock lock(&reserve_mu_);
        reserved_.fetch_sub(bytes, std::memory_order_relaxed);
      }
      // The backend ran out: idle memory of ours may be what it needs.
      if (!absl::IsResourceExhausted(segment.status()) || attempt > 0 ||
          Trim(absl::ZeroDuration()) == 0) {
        return segment.status();
      }
      continue;
    }
    if (attempt > 0 || Trim(absl::ZeroDuration()) == 0) {
      limit_rejections_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(LimitMessage(bytes));
    }
  }
}

std::uint64_t CarvingPool::HeldIdleBytes() const {
  std::uint64_t bytes = 0;
  for (Arena* arena : AllArenas()) {
    absl::MutexLock lock(&arena->mu);
    for (auto& [raw, owned] : arena->segments) {
      if (Arena::Idle(*raw) && raw->HeldElsewhere()) bytes += raw->size;
    }
  }
  return bytes;
}

std::string CarvingPool::LimitMessage(std::uint64_t bytes) const {
  const std::uint64_t reserved = reserved_.load();
  const std::uint64_t used = used_.load();
  std::string message = absl::StrCat(
      location_.ToString(), " pool: cannot reserve ", bytes, " bytes (",
      FormatBytes(bytes), "): ", reserved, " of the limit ",
      options_.limit_bytes, " bytes (", FormatBytes(options_.limit_bytes),
      ") are reserved, ", used, " in use; no idle segment was left to trim");
  if (const std::uint64_t held = HeldIdleBytes(); held > 0) {
    absl::StrAppend(&message, " (", held, " bytes of idle segments are held ",
                    "for sessions that received their legacy IPC handles, ",
                    "until those sessions end)");
  }
  return message;
}

void CarvingPool::Release(std::vector<std::unique_ptr<PoolSegment>> segments) {
  std::uint64_t bytes = 0;
  for (const auto& segment : segments) {
    bytes += segment->size;
    // Idle: no buffer lives in it, yet a client may still hold its
    // descriptor, which would keep the pages (charged to memd) alive.
    segment->backing->Discard();
  }
  if (bytes == 0) return;
  {
    absl::MutexLock lock(&reserve_mu_);
    reserved_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  segments_.fetch_sub(segments.size(), std::memory_order_relaxed);
  trimmed_.fetch_add(bytes, std::memory_order_relaxed);
  // Destroying them here, outside every pool lock, gives the memory back
  // (unless a grant still exports it).
}

std::vector<std::unique_ptr<PoolSegment>> CarvingPool::DetachIdle(
    const std::function<std::vector<IdleSegment>(std::vector<IdleSegment>)>&
        choose,
    bool* saw_held) {
  // A first look without the cache locks: candidates only, copied out (the
  // segments may go while `choose` runs), each confirmed under every lock
  // below before it is detached.
  std::vector<IdleSegment> idle;
  *saw_held = false;
  for (Arena* arena : AllArenas()) {
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

void CarvingPool::KeepIdleWithinBudget(std::uint64_t bytes) {
  if (options_.idle_budget < 0) return;
  // Against the most ever in use, not what is in use now: a workload that
  // frees everything between rounds (a training step) needs its memory back
  // at the next round, and idle time, not growth, is what returns it.
  const double demand = static_cast<double>(
      std::max(peak_used_.load(std::memory_order_relaxed),
               used_.load(std::memory_order_relaxed) + bytes));
  const double budget = demand * (1.0 + options_.idle_budget);
  const double reserved =
      static_cast<double>(reserved_.load(std::memory_order_relaxed) + bytes);
  if (reserved <= budget) return;
  // No segment went idle since a scan that left none idle.
  const std::uint64_t events = idle_events_.load(std::memory_order_relaxed);
  if (events == idle_events_seen_.load(std::memory_order_relaxed)) return;
  bool all_taken = true;
  bool saw_held = false;
  Release(DetachIdle([&](std::vector<IdleSegment> idle) {
    // Largest first: the fewest segments to give back.
    std::sort(idle.begin(), idle.end(), [](const IdleSegment& a, const IdleSegment& b) {
      return a.size != b.size ? a.size > b.size : a.seq < b.seq;
    });
    std::vector<IdleSegment> chosen;
    double excess = reserved - budget;
    for (const IdleSegment& segment : idle) {
      if (excess <= 0) break;
      chosen.push_back(segment);
      excess -= static_cast<double>(segment.size);
    }
    all_taken = chosen.size() == idle.size();
    return chosen;
  }, &saw_held));
  // A held segment is let go without an event the pool sees: look again at
  // the next growth while any is left.
  if (all_taken && !saw_held) {
    idle_events_seen_.store(events, std::memory_order_relaxed);
  }
}

std::uint64_t CarvingPool::Trim(absl::Duration min_idle) {
  const std::int64_t now = absl::ToUnixNanos(clock_.Now());
  const std::int64_t wait = absl::ToInt64Nanoseconds(min_idle);
  std::vector<std::unique_ptr<PoolSegment>> released;
  for (Arena* arena : AllArenas()) {
    absl::MutexLock lock(&arena->mu);
    std::vector<PoolSegment*> idle;
    {
      AllCachesLock caches(*arena);
      for (auto& [raw, owned] : arena->segments) {
        const bool touched = raw->touched.exchange(false, std::memory_order_relaxed);
        if (!Arena::Idle(*raw) || touched) {
          raw->idle_since_ns.reset();
          if (wait > 0) continue;
          if (!Arena::Idle(*raw)) continue;
        }
        if (!raw->idle_since_ns) raw->idle_since_ns = now;
        // Held, it keeps its idle time and goes at the first look once let
        // go.
        if (now - *raw->idle_since_ns >= wait && !raw->HeldElsewhere()) {
          idle.push_back(raw);
        }
      }
      for (PoolSegment* segment : idle) {
        released.push_back(arena->DetachIdleLocked(segment));
      }
    }
  }
  std::uint64_t bytes = 0;
  for (const auto& segment : released) bytes += segment->size;
  Release(std::move(released));
  return bytes;
}

PoolStats CarvingPool::Stats() const {
  PoolStats stats;
  stats.location = location_;
  stats.reserved_bytes = reserved_.load(std::memory_order_relaxed);
  stats.used_bytes = used_.load(std::memory_order_relaxed);
  stats.peak_reserved_bytes = peak_reserved_.load(std::memory_order_relaxed);
  stats.peak_used_bytes = peak_used_.load(std::memory_order_relaxed);
  stats.hit_count = hits_.load(std::memory_order_relaxed);
  stats.miss_count = misses_.load(std::memory_order_relaxed);
  stats.segments = segments_.load(std::memory_order_relaxed);
  stats.scrubbed_bytes = scrubbed_.load(std::memory_order_relaxed);
  stats.trimmed_bytes = trimmed_.load(std::memory_order_relaxed);
  stats.limit_bytes = options_.limit_bytes;
  stats.limit_rejections = limit_rejections_.load(std::memory_order_relaxed);
  stats.size_classes.resize(classes_.count());
  for (std::size_t i = 0; i < classes_.count(); ++i) {
    stats.size_classes[i].bytes = classes_.bytes(i);
  }
  for (Arena* arena : AllArenas()) {
    absl::MutexLock lock(&arena->mu);
    stats.largest_free_bytes = std::max(
        {stats.largest_free_bytes, arena->small.largest_free(),
         arena->large.largest_free()});
    for (std::size_t i = 0; i < classes_.count(); ++i) {
      absl::MutexLock cache_lock(&arena->caches[i].mu);
      stats.size_classes[i].cached += arena->caches[i].blocks.size();
      stats.size_classes[i].allocations += arena->caches[i].allocations;
      stats.hit_count += arena->caches[i].hits;
    }
  }
  // A free block's bytes can be counted as used for an instant while an
  // allocation is being made; never report more used than reserved.
  stats.used_bytes = std::min(stats.used_bytes, stats.reserved_bytes);
  return stats;
}

}  // namespace memd::pool
