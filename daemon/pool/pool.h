#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/location.h"
#include "daemon/backend/backend.h"

namespace memd::pool {

// Who may see memory: allocations of one exportable segment are only ever
// handed to one domain (DESIGN.md section 4). Today a domain is a uid.
struct Domain {
  uid_t uid = 0;
  friend bool operator==(const Domain&, const Domain&) = default;
};

// A piece of a segment handed out by a pool. The segment is shared so that a
// descriptor can still be exported from it while the pool recycles it.
struct Allocation {
  std::shared_ptr<backend::Segment> segment;
  std::uint64_t offset = 0;
  // The requested size rounded up to the pool's alignment.
  std::uint64_t bytes = 0;
  Domain domain;
};

// A cheap snapshot of one pool.
struct PoolStats {
  Location location;
  std::uint64_t reserved_bytes = 0;  // Held from the backend, used or not.
  std::uint64_t used_bytes = 0;      // Handed out in live allocations.
  std::uint64_t hit_count = 0;       // Allocations served without the backend.
  std::uint64_t miss_count = 0;      // Allocations that reserved a segment.
  std::uint64_t segments = 0;
  std::uint64_t limit_bytes = 0;     // Most it may reserve.
};

/// Hands out memory of one location, reusing what was freed. Thread-safe.
class Pool {
 public:
  virtual ~Pool() = default;

  virtual const Location& location() const = 0;
  virtual std::uint64_t alignment() const = 0;

  // Errors: INVALID_ARGUMENT (0 bytes), RESOURCE_EXHAUSTED (the limit, with
  // the numbers, or the backend is out of memory), what the backend returns.
  virtual absl::StatusOr<Allocation> Allocate(std::uint64_t bytes,
                                              Domain domain) = 0;

  // Takes memory back. `exclusive` says whether only `allocation.domain`
  // (and root) ever received a handle to it: memory seen by anyone else is
  // never handed out again, because a stale mapping cannot be revoked.
  virtual void Free(Allocation allocation, bool exclusive) = 0;

  virtual PoolStats Stats() const = 0;
};

}  // namespace memd::pool
