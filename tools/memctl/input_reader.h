#pragma once

// Reads put's input into the memory that will hold it, in order: a host
// buffer's mapping at once, or a device buffer's staging slices one after
// another. Streams and devices come this way; a regular file for a device
// buffer is read by several threads (common/file_reader.h), one for a host
// buffer through the buffer's descriptor.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "tools/memctl/file_io.h"

namespace memd::memctl {

/// Reads `total` bytes of one input in order, in as many Read calls as the
/// caller likes. Borrows the Input and the Collected bytes. Not thread-safe.
class InputReader {
 public:
  // `collected`: the bytes of a stream read to its end already (put
  // without --size), else null to read `input`. `sized_by_flag`: --size
  // gave `total` (the messages say so; a device gives its first bytes).
  InputReader(Input& input, const Collected* collected, bool sized_by_flag,
              std::uint64_t total);

  // Fills `into` completely with the next bytes. Errors: FAILED_PRECONDITION when the input ends
  // early (a file that shrank; a stream shorter than --size said), else the
  // read error; each names the step "read <input>".
  absl::Status Read(std::span<std::byte> into);

  // After all `total` bytes: FAILED_PRECONDITION when the input goes on
  // (a file that grew; a stream longer than --size said).
  absl::Status CheckEnd();

 private:
  absl::Status ReadBuffered(std::span<std::byte> into);
  void CopyCollected(std::span<std::byte> into);
  absl::Status EndedEarly() const;

  Input& input_;
  const Collected* collected_;
  bool sized_by_flag_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  // Where the next collected byte is.
  std::size_t piece_ = 0;
  std::size_t piece_offset_ = 0;
};

}  // namespace memd::memctl
