#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::replay {

/// The no-reuse baseline: every allocation reserves a segment of the request
/// rounded up to the alignment, and every free gives it straight back. Its
/// overhead is the alignment's alone and its hit rate 0: what a pool costs
/// when it does not pool. Borrows the backend, which must outlive it.
/// Thread-safe. Errors: see pool::Pool.
class ExactPool : public pool::Pool {
 public:
  ExactPool(backend::Backend& backend, Location location, std::uint64_t limit_bytes);

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return alignment_; }
  absl::StatusOr<pool::Allocation> Allocate(std::uint64_t bytes,
                                            pool::Domain domain) override;
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override;
  void Free(pool::Allocation allocation) override;
  // Holds nothing idle: always 0.
  std::uint64_t Trim(absl::Duration min_idle) override { return 0; }
  pool::PoolStats Stats() const override;

 private:
  backend::Backend& backend_;
  const Location location_;
  const std::uint64_t alignment_;
  const std::uint64_t limit_bytes_;

  mutable absl::Mutex mu_;
  // Includes segments being reserved right now (see Pow2Pool).
  std::uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t peak_used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t segments_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace memd::replay
