#include "tools/replay/exact_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::replay {

ExactPool::ExactPool(backend::Backend& backend, Location location,
                     std::uint64_t limit_bytes)
    : backend_(backend),
      location_(location),
      alignment_(backend.alignment(location)),
      limit_bytes_(limit_bytes) {}

std::uint64_t ExactPool::AllocationBytes(std::uint64_t bytes) const {
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  return aligned == 0 ? bytes : aligned;
}

absl::StatusOr<pool::Allocation> ExactPool::Allocate(std::uint64_t bytes,
                                                     pool::Domain domain) {
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  const std::uint64_t aligned = AlignUp(bytes, alignment_);
  if (aligned == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocation of ", bytes, " bytes overflows"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (aligned > limit_bytes_ - reserved_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          location_.ToString(), " exact pool: cannot reserve ", aligned, " bytes (",
          FormatBytes(aligned), "): ", reserved_bytes_, " of the limit ", limit_bytes_,
          " bytes (", FormatBytes(limit_bytes_), ") are reserved"));
    }
    reserved_bytes_ += aligned;
  }
  absl::StatusOr<std::unique_ptr<backend::Segment>> segment =
      backend_.Reserve(location_, aligned);
  absl::MutexLock lock(&mu_);
  if (!segment.ok()) {
    reserved_bytes_ -= aligned;
    return segment.status();
  }
  ++misses_;
  ++segments_;
  used_bytes_ += aligned;
  peak_used_bytes_ = std::max(peak_used_bytes_, used_bytes_);
  pool::Allocation allocation;
  Attach(allocation, std::shared_ptr<backend::Segment>(std::move(*segment)));
  allocation.bytes = aligned;
  allocation.domain = domain;
  allocation.id = next_id_++;
  return allocation;
}

void ExactPool::Free(pool::Allocation allocation) {
  {
    absl::MutexLock lock(&mu_);
    used_bytes_ -= allocation.bytes;
    reserved_bytes_ -= allocation.bytes;
    --segments_;
  }
  // The segment goes back to the backend here, outside the lock, unless a
  // copy of the allocation still holds it.
}

pool::PoolStats ExactPool::Stats() const {
  absl::MutexLock lock(&mu_);
  pool::PoolStats stats;
  stats.location = location_;
  stats.reserved_bytes = reserved_bytes_;
  stats.used_bytes = used_bytes_;
  // Every reserved byte is in use, so the peaks are the same.
  stats.peak_reserved_bytes = peak_used_bytes_;
  stats.peak_used_bytes = peak_used_bytes_;
  stats.miss_count = misses_;
  stats.segments = segments_;
  stats.limit_bytes = limit_bytes_;
  return stats;
}

}  // namespace memd::replay
