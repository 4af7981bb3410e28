#pragma once

// Opening a FIFO without hanging. open(2) of a FIFO blocks until its other
// end is opened too, and for ever when nobody comes: a FIFO another user
// left where memctl expected a file would hang put or get (and the script
// around it). memctl opens paths non-blocking instead and waits for a FIFO's
// other end at most `timeout` (--fifo-timeout); once that end is there,
// reads and writes wait for the bytes as on any pipe, without a limit.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace memd::memctl {

// --fifo-timeout's default: long enough for a producer started in another
// shell, short enough that a script notices a FIFO nobody serves.
inline constexpr absl::Duration kDefaultFifoTimeout = absl::Seconds(10);

// `fifo` is a FIFO opened O_RDONLY | O_NONBLOCK (`path` names it in
// errors). Returns once a writer holds it open, has written, or came and
// went (the stream then ends); consumes nothing. Errors: DEADLINE_EXCEEDED
// when no writer came within `timeout`; INTERNAL (a system call failed).
absl::Status WaitForFifoWriter(int fifo, const std::string& path, absl::Duration timeout);

// Opens `path` with `flags` (which include O_WRONLY | O_NONBLOCK) and, where
// it is a FIFO nobody reads yet (ENXIO), tries again until a reader opened
// it or `timeout` passed. Errors: DEADLINE_EXCEEDED (no reader came); else
// open's, as an errno status (ErrnoStatus).
absl::StatusOr<UniqueFd> OpenWaitingForFifoReader(const std::string& path, int flags,
                                                  int mode, absl::Duration timeout);

}  // namespace memd::memctl
