#pragma once

// Reading the input of `put` and writing the output of `get`, with errors as
// statuses that name the file (no exceptions, no partial silent success).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "tools/memctl/fifo_wait.h"

namespace memd::memctl {

// How memctl opens the files named on its command line (put, get, cp).
struct FileOptions {
  // --follow-symlinks: write through a symbolic link at get's output path.
  // Off, a link there is refused (OutputFile).
  bool follow_symlinks = false;
  // --fifo-timeout: how long opening a FIFO waits for its other end.
  absl::Duration fifo_timeout = kDefaultFifoTimeout;
};

/// An open input for `put`. `size` is known up front for regular files;
/// pipes, terminals and other streams (FILE "-", /dev/stdin) have none: they
/// are read to the end first (bounded) or for as many bytes as --size says.
/// Move-only; not thread-safe.
struct Input {
  enum class Kind {
    kFile,    // A regular file: its size is known.
    kStream,  // A pipe or socket: it ends when the writer is done.
    kDevice,  // A character or block device (/dev/zero, a terminal): it may never end.
  };
  UniqueFd fd;
  std::string label;                  // For messages: the path or "stdin".
  Kind kind = Kind::kStream;
  std::optional<std::uint64_t> size;  // Bytes left to read, when known.
};

// Opens `path` ("-" is stdin) without blocking in open(2): a FIFO waits for
// its writer at most `options.fifo_timeout`. Errors carry the step "read
// <path>": NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (a directory),
// DEADLINE_EXCEEDED (a FIFO nobody opened for writing), ...
absl::StatusOr<Input> OpenInput(const std::string& path, const FileOptions& options = {});

// Fills `into` completely from `input`. Errors: FAILED_PRECONDITION when the
// input ends early (a file that shrank since it was opened; a stream shorter
// than `promised_by`, e.g. "--size", said), else the read error.
absl::Status ReadExactly(Input& input, std::span<std::byte> into,
                         const std::string& promised_by = "");

// Whether `input` has nothing left to read (consumes a byte if it has).
absl::StatusOr<bool> AtEnd(Input& input);

// Bytes of a stream, in the pieces they were read into: growing one string
// would copy it and, for a moment, need twice the memory.
struct Collected {
  std::vector<std::string> pieces;
  std::uint64_t size = 0;  // Of all pieces.

  // Copies all `size` bytes to the start of `into`, which holds as many.
  void CopyTo(std::span<std::byte> into) const;
};

// Everything left in `input`, for streams of unknown size, but never more
// than `max_bytes`. Errors: RESOURCE_EXHAUSTED when the input goes on past
// `max_bytes` (the message says to pass --size), else the read error.
absl::StatusOr<Collected> ReadToEnd(Input& input, std::uint64_t max_bytes);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR. `label`
// names the destination in errors. (get writes files through OutputFile.)
absl::Status WriteAll(int fd, std::span<const std::byte> bytes,
                      const std::string& label);

}  // namespace memd::memctl
