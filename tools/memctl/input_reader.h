#pragma once

// Reads put's input into the memory that will hold it: a host buffer's
// mapping at once, or a device buffer's staging slices one after another.
// Files can be read with O_DIRECT (large aligned reads that skip the page
// cache) where the filesystem allows it.

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
  // O_DIRECT needs the memory, the file offset and the length aligned to
  // the device's logical block: a page covers every block size in use.
  static constexpr std::size_t kDirectAlignment = 4096;

  // `collected`: the bytes of a stream read to its end already (put
  // without --size), else null to read `input`. `sized_by_flag`: --size
  // gave `total` (the messages say so; a device gives its first bytes).
  InputReader(Input& input, const Collected* collected, bool sized_by_flag,
              std::uint64_t total);

  // Reads a regular file with O_DIRECT from now on, where the filesystem
  // allows it and the page cache does not hold the file's start already
  // (else, quietly, through the page cache as before). Returns whether it
  // does.
  bool TryDirect();
  // Whether at least 90% of the first 64 MiB of the file (of `size` bytes)
  // are in the page cache; false when that cannot be told.
  static bool MostlyCached(int fd, std::uint64_t size);
  bool direct() const { return direct_; }

  // Fills `into` completely with the next bytes. With O_DIRECT, `into`
  // starts on a kDirectAlignment boundary; its unaligned tail is read
  // through the page cache. Errors: FAILED_PRECONDITION when the input ends
  // early (a file that shrank; a stream shorter than --size said), else the
  // read error; each names the step "read <input>".
  absl::Status Read(std::span<std::byte> into);

  // After all `total` bytes: FAILED_PRECONDITION when the input goes on
  // (a file that grew; a stream longer than --size said).
  absl::Status CheckEnd();

 private:
  absl::Status ReadDirect(std::span<std::byte>& into);
  absl::Status ReadBuffered(std::span<std::byte> into);
  void CopyCollected(std::span<std::byte> into);
  void StopDirect();
  absl::Status EndedEarly() const;

  Input& input_;
  const Collected* collected_;
  bool sized_by_flag_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  bool direct_ = false;
  // Where the next collected byte is.
  std::size_t piece_ = 0;
  std::size_t piece_offset_ = 0;
};

}  // namespace memd::memctl
