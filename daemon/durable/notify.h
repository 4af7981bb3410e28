#pragma once

// Messages to the service manager (sd_notify(3)): READY=1, WATCHDOG=1,
// FDSTORE=1 and the rest. libsystemd's sd_notify waits without end for room
// in the manager's queue (net.unix.max_dgram_qlen datagrams, 10 by the
// kernel's default, 512 under systemd): a manager that stops reading, or a
// test harness that never does, would stall memd with a broker lock held.
// This waits a bounded time instead and says so.

#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace memd::durable {

// How long one message may wait for room in the manager's queue. systemd
// reads its queue between other work; seconds means it is wedged.
inline constexpr absl::Duration kNotifyTimeout = absl::Seconds(5);

// Sends `state` ("READY=1\nSTATUS=...") with `fds` (SCM_RIGHTS; at most 253,
// the kernel's SCM_MAX_FD) to the manager at $NOTIFY_SOCKET, as
// sd_pid_notify_with_fds(0, 0, ...) does: a datagram whose credentials the
// kernel attaches, NOTIFY_SOCKET left set. A path or an abstract ("@...")
// address is sent to directly, waiting at most `timeout`; any other form
// (systemd 254's vsock:) goes through libsystemd, unbounded. Thread-safe: a
// socket per call. Errors: FAILED_PRECONDITION (NOTIFY_SOCKET unset);
// DEADLINE_EXCEEDED (the manager's queue stayed full for `timeout`: the
// message was not sent); INVALID_ARGUMENT (too many fds, an address too
// long); otherwise the send's errno as ErrnoStatus maps it (NOT_FOUND,
// PERMISSION_DENIED, INTERNAL ECONNREFUSED: nobody listens there).
absl::Status NotifyServiceManager(std::string_view state, std::span<const int> fds = {},
                                  absl::Duration timeout = kNotifyTimeout);

}  // namespace memd::durable
