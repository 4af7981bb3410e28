#pragma once

// Where get (and cp BUFFER FILE) write: a file named on the command line,
// or stdout.

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "tools/memctl/file_io.h"

namespace memd::memctl {

/// The output of get. Owns the file's descriptor (never stdout's).
///
/// Opening follows no symbolic link at the path unless FileOptions say so
/// (another user who may write the directory could have planted one to
/// make memctl overwrite a file of the caller's), waits for a FIFO's reader
/// at most FileOptions::fifo_timeout, and truncates nothing: a regular file
/// is emptied just before the first bytes are written, so a get that fails
/// before it has any (a GPU copy, a deadline) leaves the file as it was.
/// Errors carry the step "write PATH". Move-only; not thread-safe.
class OutputFile {
 public:
  // Opens (or creates, mode 0666 less the umask) `path`. Errors:
  // FAILED_PRECONDITION (a symbolic link, not followed), DEADLINE_EXCEEDED
  // (a FIFO nobody opened for reading), open's (NOT_FOUND,
  // PERMISSION_DENIED, ...).
  static absl::StatusOr<OutputFile> Open(const std::string& path, const FileOptions& options);
  // This process's stdout, left open.
  static OutputFile Stdout();

  // "stdout" or the path, for messages.
  const std::string& label() const { return label_; }

  // Writes all of `bytes` after what was written before. Errors: write's.
  absl::Status Write(std::span<const std::byte> bytes);

  // Ends the output: empties a regular file nothing was written to, and
  // closes it reporting delayed write errors (NFS, quotas). Errors: those.
  absl::Status Close();

 private:
  OutputFile(UniqueFd owned, int fd, std::string label, bool truncate_before_writing)
      : owned_(std::move(owned)),
        fd_(fd),
        label_(std::move(label)),
        truncate_before_writing_(truncate_before_writing) {}
  absl::Status TruncateIfPending();

  UniqueFd owned_;  // Empty for stdout.
  int fd_ = -1;
  std::string label_;
  bool truncate_before_writing_ = false;  // A regular file, not yet emptied.
};

}  // namespace memd::memctl
