#pragma once

// The two sides of a copy (Broker::ResolveCopy): what a client names, what
// the transfer engine gets, and the checks between them. Plain functions of
// plain values, so that every refusal is tested without a broker.

#include <cstdint>

#include "absl/status/status.h"
#include "daemon/backend/copy_device.h"
#include "daemon/broker/copy_pin.h"
#include "daemon/broker/types.h"
#include "daemon/pool/pool.h"

namespace memd::broker {

// Bytes of a buffer that a session leases, as a copy request names them.
struct CopyRegion {
  LeaseId lease = 0;
  std::uint64_t offset = 0;  // From the buffer's first byte.
  std::uint64_t length = 0;
};

// One side of a copy, resolved: the buffer, the lease's access, where the
// daemon reaches the region's first byte, and what keeps that memory alive
// while the copy runs whatever happens to the lease.
struct CopyEnd {
  BufferInfo buffer;
  Access access = Access::kRead;
  backend::SegmentMemory memory;  // Moved to `offset` already.
  pool::SegmentHold hold;
  // Keeps the buffer, charged to its owner, from reuse while the copy may
  // reach it; a destination's also keeps it from being sealed (CopyPin).
  CopyClaimRef pin;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct CopyEnds {
  CopyEnd source;
  CopyEnd destination;
};

// Which side of a copy a region is, for messages.
enum class CopySide { kSource, kDestination };

// Lengths alone, before any lease is looked up. INVALID_ARGUMENT for a
// zero length or two different lengths, with the numbers.
absl::Status CheckCopyLengths(const CopyRegion& source, const CopyRegion& destination);

// The region lies inside the buffer: INVALID_ARGUMENT (with offset, length
// and size) when it reaches past the end or its end overflows.
absl::Status CheckRegionBounds(const CopyRegion& region, const BufferInfo& buffer,
                               CopySide side);

// What a destination must be: a read-write lease (FAILED_PRECONDITION for a
// read-only one) on a buffer not sealed yet (FAILED_PRECONDITION: sealed
// contents are final).
absl::Status CheckDestination(const CopyRegion& region, const BufferInfo& buffer,
                              Access access);

// Two regions of one buffer must not overlap (the bytes read would be the
// bytes written): INVALID_ARGUMENT naming both ranges.
absl::Status CheckNoOverlap(const CopyRegion& source, const BufferInfo& source_buffer,
                            const CopyRegion& destination,
                            const BufferInfo& destination_buffer);

}  // namespace memd::broker
