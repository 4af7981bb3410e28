#pragma once

#include <cstdint>

#include "common/location.h"
#include "daemon/pool/pool.h"

namespace memd::pool {

// A segment as a pool reserved it: what a later memd needs, with the
// segment's descriptor, to take it back (Pool::Adopt).
struct SegmentRecord {
  std::uint64_t id = 0;  // Allocation::segment_id of everything carved from it.
  Location location;
  std::uint64_t bytes = 0;
  bool small = false;  // Carved by size classes (CarvingPool's small segments).
  Domain domain;
};

/// Told of every segment that enters a pool, changes domain or leaves it, so
/// that what memd keeps across its own death (the durable state, the
/// service manager's descriptor store) follows the pool. A plain interface:
/// the pool knows nothing of where the records go.
///
/// Implementations must be thread-safe and must not call back into the pool
/// (SegmentAdded and SegmentChanged run under the pool's arena mutex, see
/// CarvingPoolOptions::journal). They return nothing: a pool cannot undo a
/// reservation for a journal that failed, so a journal keeps its own errors.
class SegmentJournal {
 public:
  virtual ~SegmentJournal() = default;

  // A segment was reserved and is in the pool; none of its memory has been
  // handed out yet. `durable_fd` (backend::Segment::DurableFd, -1 where the
  // memory cannot outlive memd) is the segment's, valid while it is in the
  // pool: dup it to keep it.
  virtual void SegmentAdded(const SegmentRecord& segment, int durable_fd) = 0;
  // An idle segment was scrubbed and now serves record.domain; nothing of it
  // has been handed out to that domain yet.
  virtual void SegmentChanged(const SegmentRecord& segment) = 0;
  // The segment left the pool (trim, idle budget, limit, a failed scrub) and
  // the pool no longer holds it; descriptors a grant or client still holds
  // may keep its memory a while.
  virtual void SegmentRemoved(std::uint64_t id) = 0;
};

}  // namespace memd::pool
