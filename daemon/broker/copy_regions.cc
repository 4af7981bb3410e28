#include "daemon/broker/copy_regions.h"

#include "absl/strings/str_cat.h"

namespace memd::broker {
namespace {

const char* SideName(CopySide side) {
  return side == CopySide::kSource ? "source" : "destination";
}

// "bytes 10..20" (end excluded), for messages.
std::string Range(const CopyRegion& region) {
  return absl::StrCat("bytes ", region.offset, "..", region.offset + region.length);
}

}  // namespace

absl::Status CheckCopyLengths(const CopyRegion& source, const CopyRegion& destination) {
  if (source.length == 0 || destination.length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a copy moves at least one byte; the source asks for ", source.length,
        " and the destination for ", destination.length));
  }
  if (source.length != destination.length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the source region is ", source.length, " bytes and the destination ",
        destination.length, "; a copy needs both the same length"));
  }
  return absl::OkStatus();
}

absl::Status CheckRegionBounds(const CopyRegion& region, const BufferInfo& buffer,
                               CopySide side) {
  // Compared without adding: offset + length may wrap.
  if (region.offset > buffer.size || region.length > buffer.size - region.offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", SideName(side), " region (offset ", region.offset, ", length ",
        region.length, ") reaches past the end of buffer '", buffer.name, "' (",
        buffer.size, " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckDestination(const CopyRegion& region, const BufferInfo& buffer,
                              Access access) {
  if (access != Access::kReadWrite) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", region.lease, " on buffer '", buffer.name,
        "' is read-only; a copy's destination needs a read-write lease"));
  }
  if (buffer.state == BufferState::kSealed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer '", buffer.name, "' is sealed: its contents are final and no copy "
        "may write them"));
  }
  return absl::OkStatus();
}

absl::Status CheckNoOverlap(const CopyRegion& source, const BufferInfo& source_buffer,
                            const CopyRegion& destination,
                            const BufferInfo& destination_buffer) {
  if (source_buffer.id != destination_buffer.id) return absl::OkStatus();
  // Both lie inside the buffer (CheckRegionBounds), so the ends do not wrap.
  const bool apart = source.offset + source.length <= destination.offset ||
                     destination.offset + destination.length <= source.offset;
  if (apart) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the source (", Range(source), ") and the destination (", Range(destination),
      ") overlap in buffer '", source_buffer.name, "'"));
}

}  // namespace memd::broker
