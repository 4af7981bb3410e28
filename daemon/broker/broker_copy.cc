// Broker: the two leases of a copy, resolved into what the transfer engine
// reaches (the checks themselves are copy_regions.h's).

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/copy_regions.h"

namespace memd::broker {

absl::StatusOr<CopyEnds> Broker::ResolveCopy(SessionId session,
                                              const CopyRegion& source,
                                              const CopyRegion& destination) {
  MEMD_RETURN_IF_ERROR(CheckCopyLengths(source, destination));
  // Declared before the lock: a refused copy's claims go after it, since
  // letting go of the last claim of a freed buffer takes the lock.
  CopyEnds ends;
  absl::Status resolved = [&]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(ends.source, CopyEndLocked(session, source, CopySide::kSource));
    MEMD_ASSIGN_OR_RETURN(ends.destination,
                          CopyEndLocked(session, destination, CopySide::kDestination));
    MEMD_RETURN_IF_ERROR(
        CheckDestination(destination, ends.destination.buffer, ends.destination.access));
    return CheckNoOverlap(source, ends.source.buffer, destination, ends.destination.buffer);
  }();
  if (!resolved.ok()) return resolved;
  return ends;
}

absl::StatusOr<CopyEnd> Broker::CopyEndLocked(SessionId session, const CopyRegion& region,
                                              CopySide side) {
  MEMD_ASSIGN_OR_RETURN(Lease * lease, FindLeaseLocked(session, region.lease));
  Buffer& buffer = *buffers_.at(lease->buffer);
  MEMD_RETURN_IF_ERROR(CheckRegionBounds(region, buffer.info, side));
  absl::StatusOr<backend::SegmentMemory> memory = buffer.allocation.Memory();
  if (!memory.ok()) {
    return absl::Status(memory.status().code(),
                        absl::StrCat("memd cannot copy buffer '", buffer.info.name, "'",
                                     " at ", buffer.info.location.ToString(), ": ",
                                     memory.status().message()));
  }
  CopyEnd end;
  end.buffer = buffer.info;
  end.access = lease->access;
  end.memory = memory->At(region.offset);
  end.hold = buffer.allocation.Hold();
  // A destination that is not writable is refused after this (CheckDestination),
  // and its claim let go unused.
  end.pin = std::make_shared<CopyClaim>(buffer.pin, side == CopySide::kDestination);
  end.offset = region.offset;
  end.length = region.length;
  return end;
}

}  // namespace memd::broker
