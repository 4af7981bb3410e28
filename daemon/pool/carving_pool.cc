#include "daemon/pool/carving_pool.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "daemon/pool/idle_segments.h"

namespace memd::pool {
namespace {

// Segment numbers, shared by every pool so that they name a segment in the
// whole daemon (clients cache device imports by them).
std::atomic<std::uint64_t> next_segment_seq{1};

// How many segments one allocation may add before giving up. Each round
// adds a segment that fits the request, and only other threads taking its
// space first can make a round fail; so many failures mean something
// unexpected, not contention.
constexpr int kMaxGrowRounds = 64;

// 2^64 as a double: a block size at or above it does not fit a uint64_t.
constexpr double kUint64Range = 18446744073709551616.0;

void RaisePeak(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen &&
         !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// Moves next_segment_seq past `id`, so that no segment reserved later takes
// an adopted segment's number.
void MoveSeqPast(std::uint64_t id) {
  std::uint64_t next = next_segment_seq.load();
  while (next <= id && !next_segment_seq.compare_exchange_weak(next, id + 1)) {
  }
}

}  // namespace

CarvingPool::CarvingPool(backend::Backend& backend, Location location,
                         CarvingPoolOptions options, const Clock& clock)
    : backend_(backend, options.limit_bytes),
      location_(location),
      alignment_(backend.alignment(location)),
      options_(options),
      small_segment_bytes_(AlignUp(
          std::max(options.small_segment_bytes,
                   AlignUp(std::max<std::uint64_t>(options.small_max_bytes, 1),
                           alignment_)),
          alignment_)),
      large_round_bytes_(std::max(options.large_round_bytes, alignment_)),
      clock_(clock),
      classes_(alignment_, options.small_max_bytes),
      arenas_(classes_.count()),
      idle_budget_(options.idle_budget) {}

CarvingPool::~CarvingPool() = default;

absl::StatusOr<Allocation> CarvingPool::Allocate(std::uint64_t bytes,
                                                 Domain domain) {
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  if (aligned == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows"));
  }
  Arena& arena = arenas_.For(domain);
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

Allocation CarvingPool::Carve(const Placement& block, std::uint64_t bytes,
                              const Domain& domain) {
  block.segment->used.fetch_add(bytes, std::memory_order_relaxed);
  block.segment->touched.store(true, std::memory_order_relaxed);
  RaisePeak(peak_used_, used_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  Allocation allocation;
  Attach(allocation, block.segment->backing,
         reinterpret_cast<std::uintptr_t>(block.segment));
  allocation.segment_id = block.segment->seq;
  allocation.offset = block.offset;
  allocation.bytes = bytes;
  allocation.domain = domain;
  // Unique among live allocations without a shared counter: no two live
  // blocks share a segment and offset.
  allocation.id = (block.segment->seq << 40) | (block.offset / alignment_);
  return allocation;
}

absl::StatusOr<Allocation> CarvingPool::AllocateSmall(Arena& arena,
                                                      std::size_t size_class) {
  const std::uint64_t bytes = classes_.bytes(size_class);
  ClassCache& cache = arena.caches[size_class];
  // The hot path: a cached block of this class, under this class's lock.
  {
    absl::MutexLock lock(&cache.mu);
    if (!cache.blocks.empty()) {
      const Placement block = cache.blocks.back();
      cache.blocks.pop_back();
      ++cache.allocations;
      ++cache.hits;
      return Carve(block, bytes, arena.domain);
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
        (missed ? misses_ : hits_).fetch_add(1, std::memory_order_relaxed);
        return Carve(*block, bytes, arena.domain);
      }
    }
    if (round > kMaxGrowRounds) {
      return absl::InternalError("could not place a small block in new segments");
    }
    MEMD_ASSIGN_OR_RETURN(bool reserved, Grow(arena, /*small=*/true, bytes));
    missed = missed || reserved;
  }
}

absl::StatusOr<Allocation> CarvingPool::AllocateLarge(Arena& arena,
                                                      std::uint64_t bytes) {
  // Free blocks larger than this stay whole (CarvingPoolOptions).
  const double fit = static_cast<double>(bytes) * (1.0 + options_.large_fit_slack);
  const std::uint64_t max_block =
      fit >= kUint64Range ? ~std::uint64_t{0} : static_cast<std::uint64_t>(fit);
  bool missed = false;
  for (int round = 0;; ++round) {
    {
      absl::MutexLock lock(&arena.mu);
      if (std::optional<Placement> block = arena.large.Take(bytes, max_block)) {
        (missed ? misses_ : hits_).fetch_add(1, std::memory_order_relaxed);
        return Carve(*block, bytes, arena.domain);
      }
    }
    if (round > kMaxGrowRounds) {
      return absl::InternalError("could not place a large block in new segments");
    }
    MEMD_ASSIGN_OR_RETURN(bool reserved, Grow(arena, /*small=*/false, bytes));
    missed = missed || reserved;
  }
}

void CarvingPool::Free(Allocation allocation) {
  auto* segment = reinterpret_cast<PoolSegment*>(InternalOf(allocation));
  Arena& arena = *segment->arena;
  const std::uint64_t bytes = allocation.bytes;
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  if (segment->small) {
    ClassCache& cache = arena.caches[classes_.ClassOf(bytes)];
    absl::MutexLock lock(&cache.mu);
    cache.blocks.push_back(Placement{segment, allocation.offset});
    if (segment->used.fetch_sub(bytes, std::memory_order_release) == bytes) {
      idle_budget_.NoteIdle();
    }
    return;
  }
  absl::MutexLock lock(&arena.mu);
  arena.large.Give(segment, allocation.offset, bytes);
  if (segment->used.fetch_sub(bytes, std::memory_order_release) == bytes) {
    idle_budget_.NoteIdle();
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
  if (options_.scrub_between_domains) segment = TakeScrubbed(arena, small, size);
  const bool reserved = segment == nullptr;
  if (reserved) {
    KeepIdleWithinBudget(size);
    MEMD_ASSIGN_OR_RETURN(std::shared_ptr<backend::Segment> backing,
                          Reserve(size, arena.domain.numa_node));
    segment = std::make_unique<PoolSegment>(
        std::move(backing), size, small, next_segment_seq.fetch_add(1));
  }
  PoolSegment& joined = *segment;
  absl::MutexLock lock(&arena.mu);
  arena.AdoptLocked(std::move(segment));
  // Under the arena's mutex: no allocation can take a block of it before
  // the journal knows where it is.
  if (options_.journal != nullptr) {
    const SegmentRecord record = RecordOf(joined, arena.domain);
    if (reserved) {
      options_.journal->SegmentAdded(record, joined.backing->DurableFd());
    } else {
      options_.journal->SegmentChanged(record);
    }
  }
  return reserved;
}

SegmentRecord CarvingPool::RecordOf(const PoolSegment& segment,
                                    const Domain& domain) const {
  return SegmentRecord{.id = segment.seq,
                       .location = location_,
                       .bytes = segment.size,
                       .small = segment.small,
                       .domain = domain};
}

std::unique_ptr<PoolSegment> CarvingPool::TakeScrubbed(const Arena& thief, bool small,
                                                       std::uint64_t bytes) {
  std::unique_ptr<PoolSegment> segment = StealIdle(arenas_.All(), thief, small, bytes);
  if (segment == nullptr) return nullptr;
  if (!segment->backing->Scrub().ok()) {
    // Not reusable across domains after all: give it back.
    std::vector<std::unique_ptr<PoolSegment>> unusable;
    unusable.push_back(std::move(segment));
    Release(std::move(unusable));
    return nullptr;
  }
  scrubbed_.fetch_add(segment->size, std::memory_order_relaxed);
  return segment;
}

absl::StatusOr<std::shared_ptr<backend::Segment>> CarvingPool::Reserve(
    std::uint64_t bytes, int numa_node) {
  auto reserve = [&] {
    return numa_node < 0 ? backend_.Reserve(location_, bytes)
                         : backend_.ReserveOnNode(location_, bytes, numa_node);
  };
  absl::StatusOr<std::unique_ptr<backend::Segment>> segment = reserve();
  // Out of room, at the limit or in the backend: idle memory of ours may be
  // what it needs.
  if (absl::IsResourceExhausted(segment.status()) &&
      Trim(absl::ZeroDuration()) > 0) {
    segment = reserve();
  }
  if (segment.ok()) return std::shared_ptr<backend::Segment>(std::move(*segment));
  if (!LimitedBackend::IsLimitRefusal(segment.status())) return segment.status();
  limit_rejections_.fetch_add(1, std::memory_order_relaxed);
  return absl::ResourceExhaustedError(LimitMessage(segment.status()));
}

std::string CarvingPool::LimitMessage(const absl::Status& refusal) const {
  std::string message =
      absl::StrCat(refusal.message(), ", ", used_.load(),
                   " in use; no idle segment was left to trim");
  if (const std::uint64_t held = HeldIdleBytes(arenas_.All()); held > 0) {
    absl::StrAppend(&message, " (", held, " bytes of idle segments are held ",
                    "for sessions that received their handles (legacy CUDA IPC, ",
                   "Level Zero), ",
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
  trimmed_.fetch_add(bytes, std::memory_order_relaxed);
  // Destroying them here, outside every pool lock, gives the memory back
  // (unless a grant still exports it) and takes it off backend_'s count;
  // then the journal hears of it.
  for (std::unique_ptr<PoolSegment>& segment : segments) {
    const std::uint64_t id = segment->seq;
    segment.reset();
    if (options_.journal != nullptr) options_.journal->SegmentRemoved(id);
  }
}

void CarvingPool::KeepIdleWithinBudget(std::uint64_t bytes) {
  const std::uint64_t demand =
      std::max(peak_used_.load(std::memory_order_relaxed),
               used_.load(std::memory_order_relaxed) + bytes);
  const std::optional<IdleBudget::Scan> scan =
      idle_budget_.Check(demand, backend_.reserved_bytes() + bytes);
  if (!scan) return;
  bool all_taken = true;
  bool saw_held = false;
  Release(DetachIdle(
      arenas_.All(),
      [&](std::vector<IdleSegment> idle) {
        return IdleBudget::Choose(std::move(idle), scan->excess_bytes, &all_taken);
      },
      &saw_held));
  idle_budget_.Scanned(*scan, all_taken && !saw_held);
}

std::uint64_t CarvingPool::Trim(absl::Duration min_idle) {
  std::vector<std::unique_ptr<PoolSegment>> released =
      DetachIdleFor(arenas_.All(), absl::ToUnixNanos(clock_.Now()),
                    absl::ToInt64Nanoseconds(min_idle));
  std::uint64_t bytes = 0;
  for (const auto& segment : released) bytes += segment->size;
  Release(std::move(released));
  return bytes;
}

absl::Status CarvingPool::CheckLive(
    std::uint64_t id, std::uint64_t size, bool small,
    const std::vector<std::pair<std::uint64_t, std::uint64_t>>& live) const {
  std::uint64_t free_from = 0;
  for (const auto& [offset, bytes] : live) {
    const std::string which = absl::StrCat("segment ", id, ": the allocation of ", bytes,
                                           " bytes at offset ", offset);
    if (bytes == 0 || offset % alignment_ != 0 || bytes % alignment_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " is not a positive multiple of the alignment ", alignment_,
                       " at a multiple of it"));
    }
    if (offset > size || bytes > size - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " ends past the segment's ", size, " bytes"));
    }
    if (offset < free_from) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " overlaps the one ending at ", free_from));
    }
    // A small segment's freed blocks go to their class's cache, which
    // hands them out as that class's size.
    if (small && (bytes > classes_.max_bytes() ||
                  classes_.bytes(classes_.ClassOf(bytes)) != bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          which, " is in a small segment but is not a size class of this pool (the ",
          "nearest is ",
          bytes > classes_.max_bytes() ? classes_.max_bytes()
                                       : classes_.bytes(classes_.ClassOf(bytes)),
          ")"));
    }
    free_from = offset + bytes;
  }
  return absl::OkStatus();
}

bool CarvingPool::HasSegment(std::uint64_t id) const {
  for (Arena* arena : arenas_.All()) {
    absl::MutexLock lock(&arena->mu);
    for (const auto& [raw, owned] : arena->segments) {
      if (raw->seq == id) return true;
    }
  }
  return false;
}

absl::StatusOr<std::vector<Allocation>> CarvingPool::Adopt(AdoptedSegment adopted) {
  if (adopted.segment == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment ", adopted.id, " comes without its memory"));
  }
  if (adopted.id == 0) {
    return absl::InvalidArgumentError("segment id 0 names no segment");
  }
  const std::uint64_t size = adopted.segment->size();
  if (size == 0 || size % alignment_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment ", adopted.id, ": its size ", size,
                     " is not a positive multiple of the alignment ", alignment_));
  }
  // By offset for the checks and the free space; `order` maps back to the
  // caller's order.
  std::vector<std::size_t> order(adopted.live.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return adopted.live[a].first < adopted.live[b].first;
  });
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted;
  sorted.reserve(order.size());
  std::uint64_t used = 0;
  for (std::size_t i : order) {
    sorted.push_back(adopted.live[i]);
    used += adopted.live[i].second;
  }
  MEMD_RETURN_IF_ERROR(CheckLive(adopted.id, size, adopted.small, sorted));

  absl::MutexLock adopt_lock(&adopt_mu_);
  if (HasSegment(adopted.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment ", adopted.id, " is in the ", location_.ToString(),
                     " pool already"));
  }
  // Counted like a reservation, past the limit if need be: the memory
  // exists and holds buffers (LimitedBackend::Count).
  std::shared_ptr<backend::Segment> backing = backend_.Count(std::move(adopted.segment));
  MoveSeqPast(adopted.id);
  auto segment = std::make_unique<PoolSegment>(std::move(backing), size, adopted.small,
                                               adopted.id);
  segment->used.store(used, std::memory_order_relaxed);
  segment->touched.store(true, std::memory_order_relaxed);
  PoolSegment* raw = segment.get();
  Arena& arena = arenas_.For(adopted.domain);
  std::vector<Allocation> allocations(adopted.live.size());
  {
    absl::MutexLock lock(&arena.mu);
    arena.AdoptCarvedLocked(std::move(segment), sorted);
    for (std::size_t i = 0; i < adopted.live.size(); ++i) {
      const auto [offset, bytes] = adopted.live[i];
      if (adopted.small) {
        ClassCache& cache = arena.caches[classes_.ClassOf(bytes)];
        absl::MutexLock cache_lock(&cache.mu);
        ++cache.allocations;
      }
      Allocation& allocation = allocations[i];
      Attach(allocation, raw->backing, reinterpret_cast<std::uintptr_t>(raw));
      allocation.segment_id = raw->seq;
      allocation.offset = offset;
      allocation.bytes = bytes;
      allocation.domain = arena.domain;
      allocation.id = (raw->seq << 40) | (offset / alignment_);
    }
  }
  RaisePeak(peak_used_, used_.fetch_add(used, std::memory_order_relaxed) + used);
  // An idle segment: the idle budget's next look must not skip it.
  if (used == 0) idle_budget_.NoteIdle();
  return allocations;
}

PoolStats CarvingPool::Stats() const {
  PoolStats stats;
  stats.location = location_;
  stats.reserved_bytes = backend_.reserved_bytes();
  stats.used_bytes = used_.load(std::memory_order_relaxed);
  stats.peak_reserved_bytes = backend_.peak_reserved_bytes();
  stats.peak_used_bytes = peak_used_.load(std::memory_order_relaxed);
  stats.hit_count = hits_.load(std::memory_order_relaxed);
  stats.miss_count = misses_.load(std::memory_order_relaxed);
  stats.segments = backend_.segments();
  stats.scrubbed_bytes = scrubbed_.load(std::memory_order_relaxed);
  stats.trimmed_bytes = trimmed_.load(std::memory_order_relaxed);
  stats.limit_bytes = backend_.limit_bytes();
  stats.limit_rejections = limit_rejections_.load(std::memory_order_relaxed);
  stats.size_classes.resize(classes_.count());
  for (std::size_t i = 0; i < classes_.count(); ++i) {
    stats.size_classes[i].bytes = classes_.bytes(i);
  }
  for (Arena* arena : arenas_.All()) {
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
