#pragma once

// Reading the input of `put` and writing the output of `get`, with errors as
// statuses that name the file (no exceptions, no partial silent success).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace memd::memctl {

/// An open input for `put`. `size` is known up front for regular files;
/// pipes, terminals and other streams (FILE "-", /dev/stdin) have none and
/// must be read to the end first. Move-only; not thread-safe.
struct Input {
  UniqueFd fd;
  std::string label;                  // For messages: the path or "stdin".
  std::optional<std::uint64_t> size;  // Bytes left to read, when known.
};

// Opens `path` ("-" is stdin). Errors carry the step "read <path>":
// NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (a directory), ...
absl::StatusOr<Input> OpenInput(const std::string& path);

// Fills `into` completely from `input`. Errors: FAILED_PRECONDITION when the
// file ends early (it shrank since it was opened), else the read error.
absl::Status ReadExactly(Input& input, std::span<std::byte> into);

// Whether `input` has nothing left to read (consumes a byte if it has).
absl::StatusOr<bool> AtEnd(Input& input);

// Everything left in `input`, for streams of unknown size.
absl::StatusOr<std::string> ReadToEnd(Input& input);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR. `label`
// names the destination in errors.
absl::Status WriteAll(int fd, std::span<const std::byte> bytes,
                      const std::string& label);

// Creates or truncates `path` (mode 0666 less the umask) and writes `bytes`.
absl::Status WriteFile(const std::string& path, std::span<const std::byte> bytes);

}  // namespace memd::memctl
