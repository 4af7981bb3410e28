#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/location.h"
#include "daemon/backend/backend.h"

namespace memd::pool {

// Who may see memory. A client that receives a handle to one piece of a
// segment can map the whole segment, so a segment's pieces only ever serve
// one domain: buffers with the same owner, group and mode, which the same
// clients may open anyway (docs/design.md, "Pools: the engine": Domains).
// The NUMA node is part of it for another reason: a segment's pages stay
// on the node they were placed on (its memfd's policy), so a segment serves
// only requests for that node, or for none (-1: wherever the kernel put
// them); an idle one never moves to a domain of another node either.
struct Domain {
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint32_t mode = 0600;
  int numa_node = -1;

  friend bool operator==(const Domain&, const Domain&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Domain& domain) {
    return H::combine(std::move(h), domain.uid, domain.gid, domain.mode, domain.numa_node);
  }
  // "uid 1000 gid 50 mode 0640" (and " numa node 1"), for messages.
  std::string ToString() const;
};

// The backend's handle types, re-exported: the broker sends what a pool
// allocation exports and names no backend type.
using backend::Access;
using backend::ExportedHandle;
using backend::HandleType;

/// Keeps one segment of a pool alive, and with it every handle exported from
/// it (an ExportedHandle's fd is owned by its segment): a grant holds one
/// until its descriptor is sent, and a session for each segment whose
/// replayable handle it received. While any hold lives, the pool counts the
/// segment as held elsewhere: it neither gives it back nor moves it to
/// another domain (CarvingPool, "Held segments"). Empty by default.
/// Copyable; thread-compatible.
class SegmentHold {
 public:
  SegmentHold() = default;

  explicit operator bool() const { return segment_ != nullptr; }
  // How many references share the segment: the pool's, every hold's, every
  // allocation's. For tests and diagnostics.
  long use_count() const { return segment_.use_count(); }

 private:
  friend class Allocation;
  explicit SegmentHold(std::shared_ptr<const backend::Segment> segment)
      : segment_(std::move(segment)) {}

  std::shared_ptr<const backend::Segment> segment_;
};

/// A piece of a segment handed out by a pool. The segment is shared so that
/// a handle can still be exported from it while the pool recycles it, and so
/// that a holder can keep it (Hold): a segment someone holds past the
/// allocation's Free stays in the pool, in its domain, until let go. Only
/// pools reach the segment itself and their own bookkeeping (Pool's
/// protected accessors). A default Allocation has no segment.
/// Thread-compatible.
class Allocation {
 public:
  // Unique among the daemon's segments for its lifetime.
  std::uint64_t segment_id = 0;
  std::uint64_t offset = 0;  // A multiple of the pool's alignment.
  // What the allocation occupies: the request rounded up to the alignment
  // (and to its size class for small requests).
  std::uint64_t bytes = 0;
  Domain domain;
  // Unique among this pool's live allocations; names it in traces.
  std::uint64_t id = 0;

  // What to send a client for `access`: a handle to the whole segment (the
  // allocation is at `offset` in it), valid while the segment lives (keep a
  // Hold() until it is sent). Errors: FAILED_PRECONDITION (no segment),
  // those of backend::Segment::Export (INTERNAL).
  absl::StatusOr<ExportedHandle> Export(Access access) const;
  // The size of the whole segment (what a handle exports); 0 without one.
  std::uint64_t segment_bytes() const;
  // Keeps the segment alive, and held elsewhere, as long as it lives.
  SegmentHold Hold() const { return SegmentHold(segment_); }
  // Where the daemon reaches the allocation's first byte (the segment's
  // memory moved by `offset`), for the transfer engine; valid while the
  // segment lives (keep a Hold()). Errors: FAILED_PRECONDITION (no
  // segment), those of backend::Segment::Memory (UNIMPLEMENTED where the
  // backend cannot reach its memory).
  absl::StatusOr<backend::SegmentMemory> Memory() const;

 private:
  friend class Pool;

  std::shared_ptr<backend::Segment> segment_;
  // The pool's own bookkeeping; only the pool that made it reads it.
  std::uintptr_t internal_ = 0;
};

// One size class: its block size, how many allocations it served and how
// many freed blocks it holds for reuse now.
struct SizeClassStats {
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  std::uint64_t cached = 0;
};

// A cheap snapshot of one pool.
struct PoolStats {
  Location location;
  std::uint64_t reserved_bytes = 0;  // Held from the backend, used or not.
  std::uint64_t used_bytes = 0;      // In live allocations.
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_used_bytes = 0;
  std::uint64_t hit_count = 0;   // Allocations served without the backend.
  std::uint64_t miss_count = 0;  // Allocations that reserved a segment.
  std::uint64_t largest_free_bytes = 0;  // Largest contiguous free block.
  std::uint64_t segments = 0;
  std::uint64_t scrubbed_bytes = 0;  // Zeroed before changing domain.
  std::uint64_t trimmed_bytes = 0;   // Given back to the backend, in all.
  std::uint64_t limit_bytes = 0;     // Most it may reserve.
  std::uint64_t limit_rejections = 0;  // Allocations refused at the limit.
  std::vector<SizeClassStats> size_classes;

  std::uint64_t free_bytes() const { return reserved_bytes - used_bytes; }
  // 1 - largest free block / all free bytes: 0 when the free memory is one
  // block (or there is none), near 1 when it is scattered in small pieces.
  double fragmentation() const {
    const std::uint64_t free = free_bytes();
    return free == 0 ? 0.0
                     : 1.0 - static_cast<double>(largest_free_bytes) /
                                 static_cast<double>(free);
  }
};

// A segment an earlier memd's pool reserved, to be taken back (Pool::Adopt)
// with the allocations that were live in it.
struct AdoptedSegment {
  std::uint64_t id = 0;  // Its Allocation::segment_id then, and again now.
  bool small = false;    // Carved by size classes.
  Domain domain = {};
  // The memory (backend::Backend::Adopt). The pool should be its only
  // owner: a reference kept elsewhere keeps the memory past the pool.
  std::shared_ptr<backend::Segment> segment = nullptr;
  // (offset, bytes) of each live allocation, in any order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live = {};
};

/// Hands out memory of one location, reusing what was freed. Thread-safe.
class Pool {
 public:
  virtual ~Pool() = default;

  virtual const Location& location() const = 0;
  virtual std::uint64_t alignment() const = 0;

  // Errors: INVALID_ARGUMENT (0 bytes, or a size that overflows),
  // RESOURCE_EXHAUSTED (the limit, with the numbers, after trimming idle
  // segments; or the backend is out of memory), what the backend returns.
  virtual absl::StatusOr<Allocation> Allocate(std::uint64_t bytes,
                                              Domain domain) = 0;

  // What an allocation of `bytes` takes: Allocation::bytes of a successful
  // Allocate(bytes), the request rounded the way this pool rounds it. Byte
  // quotas charge this figure, so that many tiny buffers cost what they
  // hold (a page each for host memory, a 2 MiB granule each on a GPU). A
  // size Allocate refuses (0, or one whose rounding overflows) is returned
  // as it is.
  virtual std::uint64_t AllocationBytes(std::uint64_t bytes) const = 0;

  // Takes back an allocation this pool made.
  virtual void Free(Allocation allocation) = 0;

  // Gives back to the backend every segment that has been idle (no live
  // allocation) for at least `min_idle`; zero gives back all idle ones.
  // A segment someone else still holds (a SegmentHold kept past its
  // allocation's Free: a session that received a replayable handle of it)
  // stays until let go. Returns the bytes given back.
  virtual std::uint64_t Trim(absl::Duration min_idle) = 0;

  virtual PoolStats Stats() const = 0;

  // Takes back a segment a previous memd's pool reserved, with its live
  // allocations: returns them (with this segment id, offset, bytes and
  // domain; Export, Memory and Hold work, Free gives them back) in `live`'s
  // order. Recovery, before the pool serves: nothing is copied and nothing
  // is reported to a journal (the segment is recorded already). Errors:
  // INVALID_ARGUMENT with the numbers (no segment, a size that is not a
  // multiple of the alignment, an allocation misaligned, out of bounds,
  // overlapping another, or in a small segment not of a size class; an id
  // already in the pool), UNIMPLEMENTED (a pool that cannot). Never
  // refused by the pool's limit: the memory exists and holds buffers, and a
  // limit lowered across a restart must not destroy them; the pool then
  // refuses new reservations until it is back under the limit.
  virtual absl::StatusOr<std::vector<Allocation>> Adopt(AdoptedSegment segment) {
    return absl::UnimplementedError(absl::StrCat(
        "this ", location().ToString(), " pool cannot adopt segment ", segment.id));
  }

 protected:
  // What only pools see of an allocation: its segment and the making pool's
  // own bookkeeping (`internal`, e.g. a pointer to its record of the
  // segment).
  static void Attach(Allocation& allocation,
                     std::shared_ptr<backend::Segment> segment,
                     std::uintptr_t internal = 0) {
    allocation.segment_ = std::move(segment);
    allocation.internal_ = internal;
  }
  static const std::shared_ptr<backend::Segment>& SegmentOf(
      const Allocation& allocation) {
    return allocation.segment_;
  }
  static std::shared_ptr<backend::Segment> TakeSegment(Allocation& allocation) {
    return std::move(allocation.segment_);
  }
  static std::uintptr_t InternalOf(const Allocation& allocation) {
    return allocation.internal_;
  }
};

}  // namespace memd::pool
