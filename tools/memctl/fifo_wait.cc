#include "tools/memctl/fifo_wait.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"

namespace memd::memctl {
namespace {

// Neither a writer arriving at a FIFO nor a reader opening one wakes a
// poll(2), so memctl looks again this often while it waits.
constexpr absl::Duration kLookAgain = absl::Milliseconds(50);

int PollMilliseconds(absl::Duration left) {
  return static_cast<int>(
      absl::ToInt64Milliseconds(absl::Ceil(std::min(left, kLookAgain), absl::Milliseconds(1))));
}

}  // namespace

absl::Status WaitForFifoWriter(int fifo, const std::string& path, absl::Duration timeout) {
  // tee(2) duplicates bytes from one pipe into another without consuming
  // them, and tells the three cases apart: bytes (> 0), a writer that has
  // written nothing yet (EAGAIN), no writer at all (0). A read would consume
  // the byte it probes with.
  int scratch[2];
  if (::pipe2(scratch, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoStatus("pipe2", errno);
  const UniqueFd scratch_read(scratch[0]), scratch_write(scratch[1]);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const ssize_t teed = ::tee(fifo, scratch_write.get(), 1, SPLICE_F_NONBLOCK);
    if (teed > 0 || (teed < 0 && errno == EAGAIN)) return absl::OkStatus();
    if (teed < 0 && errno != EINTR) return ErrnoStatus("tee", errno);
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no process opened the FIFO ", path, " for writing within ",
          absl::FormatDuration(timeout), "; start its writer first, or raise --fifo-timeout"));
    }
    pollfd readable{fifo, POLLIN, 0};
    if (::poll(&readable, 1, PollMilliseconds(left)) < 0 && errno != EINTR) {
      return ErrnoStatus("poll", errno);
    }
    // POLLHUP: a writer came and went; what it wrote (if anything) is read
    // next, then the end of the stream.
    if (readable.revents & POLLHUP) return absl::OkStatus();
  }
}

absl::StatusOr<UniqueFd> OpenWaitingForFifoReader(const std::string& path, int flags,
                                                  int mode, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    UniqueFd fd(::open(path.c_str(), flags, mode));
    if (fd) return fd;
    const int error = errno;
    if (error == EINTR) continue;
    if (error != ENXIO) return ErrnoStatus("open", error);
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no process opened the FIFO ", path, " for reading within ",
          absl::FormatDuration(timeout), "; start its reader first, or raise --fifo-timeout"));
    }
    ::poll(nullptr, 0, PollMilliseconds(left));
  }
}

}  // namespace memd::memctl
