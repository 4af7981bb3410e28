#include "tools/memctl/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/fifo_wait.h"

namespace memd::memctl {
namespace {

std::string WriteStep(const std::string& path) { return absl::StrCat("write ", path); }

bool IsSymbolicLink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

absl::StatusOr<OutputFile> OutputFile::Open(const std::string& path,
                                            const FileOptions& options) {
  // No O_TRUNC: a file is emptied only once there are bytes to replace it.
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of
  // blocking in open.
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK |
                    (options.follow_symlinks ? 0 : O_NOFOLLOW);
  absl::StatusOr<UniqueFd> fd =
      OpenWaitingForFifoReader(path, flags, 0666, options.fifo_timeout);
  if (!fd.ok()) {
    if (!options.follow_symlinks && IsSymbolicLink(path)) {
      return Failed(WriteStep(path),
                    absl::FailedPreconditionError(absl::StrCat(
                        path, " is a symbolic link, which memctl does not write "
                        "through: whoever may write its directory could have made "
                        "it point at one of your files. Remove it, name the file "
                        "it points to, or pass --follow-symlinks (-o - writes to "
                        "stdout)")));
    }
    return Failed(WriteStep(path), fd.status());
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Failed(WriteStep(path), ErrnoStatus("fstat", errno));
  // Writes block as on any file from here on.
  const int status_flags = ::fcntl(fd->get(), F_GETFL);
  if (status_flags < 0 || ::fcntl(fd->get(), F_SETFL, status_flags & ~O_NONBLOCK) != 0) {
    return Failed(WriteStep(path), ErrnoStatus("fcntl", errno));
  }
  const int raw = fd->get();
  return OutputFile(*std::move(fd), raw, path, S_ISREG(st.st_mode));
}

OutputFile OutputFile::Stdout() { return OutputFile(UniqueFd(), STDOUT_FILENO, "stdout", false); }

absl::Status OutputFile::TruncateIfPending() {
  if (!truncate_before_writing_) return absl::OkStatus();
  if (::ftruncate(fd_, 0) != 0) return Failed(WriteStep(label_), ErrnoStatus("ftruncate", errno));
  truncate_before_writing_ = false;
  return absl::OkStatus();
}

absl::Status OutputFile::Write(std::span<const std::byte> bytes) {
  if (absl::Status emptied = TruncateIfPending(); !emptied.ok()) return emptied;
  return WriteAll(fd_, bytes, label_);
}

absl::Status OutputFile::Close() {
  if (absl::Status emptied = TruncateIfPending(); !emptied.ok()) return emptied;
  if (!owned_) return absl::OkStatus();
  // Delayed write errors (NFS, quotas) surface only at close.
  if (::close(owned_.release()) != 0) return Failed(WriteStep(label_), ErrnoStatus("close", errno));
  return absl::OkStatus();
}

}  // namespace memd::memctl
