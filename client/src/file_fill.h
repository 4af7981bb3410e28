#pragma once

// Bytes of a file into a host buffer's memory through the buffer's own
// descriptor (sendfile), never through a mapping: a fresh mapping faults
// every page on first touch, which made `memctl put` into host memory a
// quarter of a parallel read's speed (docs/benchmarks.md, "A file into a
// buffer").

#include <cstdint>

#include "absl/status/status.h"
#include "common/unique_fd.h"

namespace memd::internal {

/// The descriptor of a host buffer's segment, kept by a writable Buffer
/// created or opened with keep_descriptor, and where the buffer starts in
/// it. Immutable; thread-safe.
struct KeptDescriptor {
  KeptDescriptor(UniqueFd fd, std::uint64_t offset) : fd(std::move(fd)), offset(offset) {}
  const UniqueFd fd;
  const std::uint64_t offset;
};

// Copies `length` bytes of `file` from `file_offset` to `segment` at
// `segment_offset`, on `threads` threads (each its own range and its own
// open file description of the segment, so that their positions do not
// mix; one thread on `segment` itself where /proc cannot reopen it: not
// concurrently with another call on the same segment descriptor). The caller has checked the
// range against the buffer. Errors: the file's as the errno mapping of
// sendfile (INVALID_ARGUMENT for a file sendfile cannot read: a pipe, a
// socket), OUT_OF_RANGE when the file ends first (with the numbers),
// PERMISSION_DENIED where the segment refuses writes (sealed).
absl::Status SendFileInto(int segment, std::uint64_t segment_offset, int file,
                          std::uint64_t file_offset, std::uint64_t length, int threads);

}  // namespace memd::internal
