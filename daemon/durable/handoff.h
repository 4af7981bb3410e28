#pragma once

// An in-place upgrade's hand-off: memd execs its new binary with the
// descriptors that keep every buffer, as nginx and HAProxy hand their
// sockets on. The descriptors keep their numbers; a sealed memfd lists
// them ("<fd> <name>" a line) and MEMD_HANDOFF_FD / MEMD_HANDOFF_PID name
// it. Moving them onto 3, 4, ... for LISTEN_FDS instead would dup2 over
// numbers other threads of the old memd still own: a thread closing "its"
// descriptor then closes a buffer's, or writes into it, before the exec
// ends it (upgrade_test caught the first, one exec in three).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/durable/fd_store.h"

namespace memd::durable {

inline constexpr char kHandOffFdVariable[] = "MEMD_HANDOFF_FD";
inline constexpr char kHandOffPidVariable[] = "MEMD_HANDOFF_PID";

// A descriptor to hand on, borrowed: ExecWithFds neither closes nor takes
// it.
struct PassedFd {
  std::string_view name;
  int fd = -1;
};

// Replaces this process by `path` with `argv` (argv[0] included), same pid,
// handing on `fds` under their names: each stays at its number, inherited
// (CLOEXEC cleared), and the new image takes them with TakeListenedFds. The
// environment is this one, less any LISTEN_* or MEMD_HANDOFF_*. No other
// descriptor changes: others follow their own CLOEXEC flags. Returns only on
// failure, with every flag as it was. Errors: INVALID_ARGUMENT (empty argv,
// a name FdNameIsValid refuses, a negative fd, one fd given twice);
// FAILED_PRECONDITION (a descriptor that is not open); memfd_create's or
// execve's errno as ErrnoStatus maps it (NOT_FOUND, PERMISSION_DENIED, ...).
absl::Status ExecWithFds(const std::string& path, const std::vector<std::string>& argv,
                         std::span<const PassedFd> fds);

// Takes what an ExecWithFds into this image handed on, in the table's order,
// CLOEXEC set, and unsets MEMD_HANDOFF_FD and MEMD_HANDOFF_PID. Empty when
// there was none, or it was meant for another pid (a child that inherited
// the environment): then nothing is touched. All or nothing. Errors:
// INVALID_ARGUMENT (variables or a table that ExecWithFds would not have
// written: a number below 3 or given twice, one not open, a bad name, a
// table that is not a sealed memfd of at most kMaxHandOffTableBytes).
absl::StatusOr<std::vector<ListenedFd>> TakeHandedOffFds();

// The largest table taken: 16384 descriptors (memd's FileDescriptorStoreMax)
// with the longest names fit, twice over.
inline constexpr std::size_t kMaxHandOffTableBytes = 16 << 20;

}  // namespace memd::durable
