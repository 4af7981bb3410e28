#include "daemon/pool/segment_cache_pool.h"

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::pool {

SegmentCachePool::SegmentCachePool(backend::Backend& backend, Location location,
                                   SegmentCacheOptions options)
    : backend_(backend),
      location_(location),
      alignment_(backend.alignment(location)),
      options_(options) {}

absl::StatusOr<Allocation> SegmentCachePool::Allocate(std::uint64_t bytes,
                                                      Domain domain) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("cannot allocate 0 bytes");
  }
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  if (aligned == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows"));
  }
  std::vector<std::shared_ptr<backend::Segment>> evicted;
  {
    absl::MutexLock lock(&mu_);
    auto cached = cache_.find(CacheKey{domain, aligned});
    if (cached != cache_.end()) {
      std::shared_ptr<backend::Segment> segment = std::move(cached->second.back());
      cached->second.pop_back();
      if (cached->second.empty()) cache_.erase(cached);
      cached_bytes_ -= aligned;
      used_bytes_ += aligned;
      ++hits_;
      return Allocation{std::move(segment), 0, aligned, domain};
    }
    if (reserved_bytes_ + aligned > options_.limit_bytes) {
      evicted = EvictForLocked(aligned);
    }
    if (reserved_bytes_ + aligned > options_.limit_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          location_.ToString(), " pool: cannot reserve ", aligned, " bytes (",
          FormatBytes(aligned), "): ", reserved_bytes_, " of the limit ",
          options_.limit_bytes, " bytes (", FormatBytes(options_.limit_bytes),
          ") are reserved, ", used_bytes_, " in use"));
    }
    reserved_bytes_ += aligned;
  }
  evicted.clear();  // Give memory back before asking the backend for more.

  auto segment = backend_.Reserve(location_, aligned);
  absl::MutexLock lock(&mu_);
  if (!segment.ok()) {
    reserved_bytes_ -= aligned;
    return segment.status();
  }
  ++misses_;
  ++segments_;
  used_bytes_ += aligned;
  return Allocation{std::shared_ptr<backend::Segment>(std::move(*segment)), 0,
                    aligned, domain};
}

void SegmentCachePool::Free(Allocation allocation) {
  {
    absl::MutexLock lock(&mu_);
    used_bytes_ -= allocation.bytes;
    if (cached_bytes_ + allocation.bytes <= options_.max_cached_bytes) {
      cache_[CacheKey{allocation.domain, allocation.bytes}].push_back(
          std::move(allocation.segment));
      cached_bytes_ += allocation.bytes;
      return;
    }
    reserved_bytes_ -= allocation.bytes;
    --segments_;
  }
  // The segment, if nobody else holds it, is destroyed here, outside the lock.
}

std::vector<std::shared_ptr<backend::Segment>> SegmentCachePool::EvictForLocked(
    std::uint64_t needed) {
  std::vector<std::shared_ptr<backend::Segment>> evicted;
  while (reserved_bytes_ + needed > options_.limit_bytes && !cache_.empty()) {
    auto entry = cache_.begin();
    const std::uint64_t bytes = entry->first.bytes;
    evicted.push_back(std::move(entry->second.back()));
    entry->second.pop_back();
    if (entry->second.empty()) cache_.erase(entry);
    cached_bytes_ -= bytes;
    reserved_bytes_ -= bytes;
    --segments_;
  }
  return evicted;
}

std::uint64_t SegmentCachePool::Trim(absl::Duration) {
  std::vector<std::shared_ptr<backend::Segment>> evicted;
  absl::MutexLock lock(&mu_);
  const std::uint64_t before = cached_bytes_;
  for (auto& [key, segments] : cache_) {
    for (auto& segment : segments) evicted.push_back(std::move(segment));
    segments_ -= segments.size();
  }
  cache_.clear();
  reserved_bytes_ -= cached_bytes_;
  cached_bytes_ = 0;
  return before;
}

PoolStats SegmentCachePool::Stats() const {
  absl::MutexLock lock(&mu_);
  PoolStats stats;
  stats.location = location_;
  stats.reserved_bytes = reserved_bytes_;
  stats.used_bytes = used_bytes_;
  stats.hit_count = hits_;
  stats.miss_count = misses_;
  stats.segments = segments_;
  stats.limit_bytes = options_.limit_bytes;
  return stats;
}

}  // namespace memd::pool
