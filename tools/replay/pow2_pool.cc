#include "tools/replay/pow2_pool.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bytes.h"

namespace memd::replay {

Pow2Pool::Pow2Pool(backend::Backend& backend, Location location,
                   std::uint64_t limit_bytes)
    : backend_(backend),
      location_(location),
      alignment_(backend.alignment(location)),
      limit_bytes_(limit_bytes) {}

std::uint64_t Pow2Pool::AllocationBytes(std::uint64_t bytes) const {
  if (bytes == 0 || bytes > (std::uint64_t{1} << 63)) return bytes;
  return std::max(alignment_, std::bit_ceil(bytes));
}

absl::StatusOr<pool::Allocation> Pow2Pool::Allocate(std::uint64_t bytes,
                                                    pool::Domain domain) {
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  if (bytes > (std::uint64_t{1} << 63)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows a power of two"));
  }
  const std::uint64_t block = std::max(alignment_, std::bit_ceil(bytes));
  std::vector<std::shared_ptr<backend::Segment>> evicted;
  {
    absl::MutexLock lock(&mu_);
    auto cached = cache_.find(CacheKey{domain, block});
    if (cached != cache_.end()) {
      std::shared_ptr<backend::Segment> segment = std::move(cached->second.back().segment);
      cached->second.pop_back();
      if (cached->second.empty()) cache_.erase(cached);
      cached_bytes_ -= block;
      --sizes_[block].cached;
      ++hits_;
      return UseLocked(std::move(segment), block, domain);
    }
    if (block > limit_bytes_ - reserved_bytes_) {
      // Giving back cached segments helps only when the live ones leave room.
      if (block > limit_bytes_ - (reserved_bytes_ - cached_bytes_)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            location_.ToString(), " pow2 pool: cannot reserve ", block, " bytes (",
            FormatBytes(block), "): ", reserved_bytes_ - cached_bytes_,
            " bytes are in live blocks of the limit ", limit_bytes_, " (",
            FormatBytes(limit_bytes_), ")"));
      }
      evicted = EvictLocked(block);
    }
    reserved_bytes_ += block;
  }
  evicted.clear();  // Give memory back before asking the backend for more.

  absl::StatusOr<std::unique_ptr<backend::Segment>> segment =
      backend_.Reserve(location_, block);
  absl::MutexLock lock(&mu_);
  if (!segment.ok()) {
    reserved_bytes_ -= block;
    return segment.status();
  }
  ++misses_;
  ++segments_;
  peak_reserved_bytes_ = std::max(peak_reserved_bytes_, reserved_bytes_);
  return UseLocked(std::shared_ptr<backend::Segment>(std::move(*segment)), block, domain);
}

pool::Allocation Pow2Pool::UseLocked(std::shared_ptr<backend::Segment> segment,
                                     std::uint64_t bytes, const pool::Domain& domain) {
  used_bytes_ += bytes;
  peak_used_bytes_ = std::max(peak_used_bytes_, used_bytes_);
  ++sizes_[bytes].allocations;
  pool::Allocation allocation;
  Attach(allocation, std::move(segment));
  allocation.bytes = bytes;
  allocation.domain = domain;
  allocation.id = next_id_++;
  return allocation;
}

void Pow2Pool::Free(pool::Allocation allocation) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  used_bytes_ -= allocation.bytes;
  cached_bytes_ += allocation.bytes;
  ++sizes_[allocation.bytes].cached;
  cache_[CacheKey{allocation.domain, allocation.bytes}].push_back(
      Cached{TakeSegment(allocation), now});
}

void Pow2Pool::DropCachedLocked(std::uint64_t bytes) {
  cached_bytes_ -= bytes;
  reserved_bytes_ -= bytes;
  trimmed_bytes_ += bytes;
  --segments_;
  --sizes_[bytes].cached;
}

std::vector<std::shared_ptr<backend::Segment>> Pow2Pool::EvictLocked(
    std::uint64_t needed) {
  std::vector<std::shared_ptr<backend::Segment>> evicted;
  while (needed > limit_bytes_ - reserved_bytes_ && !cache_.empty()) {
    auto largest = std::max_element(cache_.begin(), cache_.end(),
                                    [](const auto& a, const auto& b) {
                                      return a.first.bytes < b.first.bytes;
                                    });
    const std::uint64_t bytes = largest->first.bytes;
    evicted.push_back(std::move(largest->second.back().segment));
    largest->second.pop_back();
    if (largest->second.empty()) cache_.erase(largest);
    DropCachedLocked(bytes);
  }
  return evicted;
}

std::uint64_t Pow2Pool::Trim(absl::Duration min_idle) {
  std::vector<std::shared_ptr<backend::Segment>> trimmed;
  const absl::Time now = absl::Now();
  std::uint64_t trimmed_bytes = 0;
  absl::MutexLock lock(&mu_);
  for (auto it = cache_.begin(); it != cache_.end();) {
    std::vector<Cached>& list = it->second;
    // Oldest first, so the idle ones are a prefix.
    auto idle_end = std::find_if(list.begin(), list.end(), [&](const Cached& cached) {
      return now - cached.freed_at < min_idle;
    });
    for (auto cached = list.begin(); cached != idle_end; ++cached) {
      trimmed.push_back(std::move(cached->segment));
      DropCachedLocked(it->first.bytes);
      trimmed_bytes += it->first.bytes;
    }
    list.erase(list.begin(), idle_end);
    if (list.empty()) {
      cache_.erase(it++);
    } else {
      ++it;
    }
  }
  // `trimmed` dies after the lock is released (declared before it).
  return trimmed_bytes;
}

pool::PoolStats Pow2Pool::Stats() const {
  absl::MutexLock lock(&mu_);
  pool::PoolStats stats;
  stats.location = location_;
  stats.reserved_bytes = reserved_bytes_;
  stats.used_bytes = used_bytes_;
  stats.peak_reserved_bytes = peak_reserved_bytes_;
  stats.peak_used_bytes = peak_used_bytes_;
  stats.hit_count = hits_;
  stats.miss_count = misses_;
  stats.segments = segments_;
  stats.trimmed_bytes = trimmed_bytes_;
  stats.limit_bytes = limit_bytes_;
  stats.size_classes.reserve(sizes_.size());
  for (const auto& [bytes, counts] : sizes_) {
    if (counts.cached > 0) stats.largest_free_bytes = bytes;  // Ascending keys.
    stats.size_classes.push_back({bytes, counts.allocations, counts.cached});
  }
  return stats;
}

}  // namespace memd::replay
