#pragma once

// The service manager's file descriptor store (sd_notify(3), "FDSTORE=1"):
// where memd parks each segment's descriptor and its state memfd so that
// they outlive memd, and how it gets them back at its next start
// (LISTEN_FDS / LISTEN_FDNAMES, or handoff.h's table after an exec of a new
// binary). Lifetimes: /work/shared/notes/durability.md.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace memd::durable {

// The most descriptors one notify message may carry: the kernel's
// SCM_MAX_FD. A larger sendmsg fails with EINVAL, so StoreMany refuses it.
inline constexpr std::size_t kMaxFdsPerMessage = 253;

// The longest name systemd accepts (FDNAME_MAX).
inline constexpr std::size_t kMaxFdNameLength = 255;

// Whether systemd would keep `name` as given: 1 to 255 printable ASCII
// characters, no ':' (the separator of LISTEN_FDNAMES). systemd itself
// accepts the empty name, but sd_listen_fds_with_names could not tell it
// apart in LISTEN_FDNAMES, so memd refuses it. systemd files a descriptor
// with an invalid name under "stored" instead of refusing the message: a
// bad name must be caught here, before sending.
bool FdNameIsValid(std::string_view name);

/// Somewhere descriptors outlive this process, by name. Several descriptors
/// may share a name. Storing is fire-and-forget: the manager may still drop
/// a descriptor it was sent (its FileDescriptorStoreMax= is reached or 0,
/// the same open file is already stored, it polls POLLHUP/POLLERR), and says
/// so only in its log. Implementations are thread-safe.
/// Errors: INVALID_ARGUMENT (a name FdNameIsValid refuses, a negative fd,
/// too many fds); FAILED_PRECONDITION (the manager's socket went away from
/// the environment); otherwise the send's errno as ErrnoStatus maps it
/// (NOT_FOUND or UNAVAILABLE: no manager listens any more).
class FdStore {
 public:
  virtual ~FdStore() = default;

  // Has the manager keep a duplicate of `fd` under `name`; the caller keeps
  // `fd`.
  virtual absl::Status Store(std::string_view name, int fd) = 0;

  // As Store, for up to kMaxFdsPerMessage descriptors in one message, all
  // under `name`. An empty `fds` sends nothing.
  virtual absl::Status StoreMany(std::string_view name, std::span<const int> fds) = 0;

  // Has the manager close every descriptor it keeps under `name` (none is
  // not an error: the manager does not answer).
  virtual absl::Status Remove(std::string_view name) = 0;
};

// The store of the service manager at $NOTIFY_SOCKET (systemd, or a test's
// ServiceManager), through libsystemd. Returns nullptr when NOTIFY_SOCKET is
// unset: memd runs without a manager (a container, a shell), and nothing
// outlives it. Leaves NOTIFY_SOCKET set: READY=1, WATCHDOG=1 and later
// stores need it too.
std::unique_ptr<FdStore> ServiceManagerStore();

// A descriptor this process was started with, and the name it was stored
// under ("unknown" where the starter gave no LISTEN_FDNAMES).
struct ListenedFd {
  std::string name;
  UniqueFd fd;
};

// Takes the descriptors this process was started with: the service
// manager's (LISTEN_FDS from fd 3, for this pid: LISTEN_PID), then those an
// ExecWithFds of the memd before it handed on (handoff.h), in the order
// given. Match them by name:
// systemd 252 does not hand them back in the order they were stored (seen
// under a real systemd 252). They stay in the store meanwhile: storing one
// again is suppressed by systemd as the same open file, but a new
// descriptor under an old name adds to it. CLOEXEC is set so that nothing
// this process starts inherits them, and the variables that named them are
// unset so that a second call (or a child) finds none. Empty when there are
// none or they are meant for another pid. Call it once, early, before other
// threads open descriptors. Errors: what libsystemd reports
// (INVALID_ARGUMENT: malformed variables, or as many names as fds missing);
// TakeHandedOffFds's.
absl::StatusOr<std::vector<ListenedFd>> TakeListenedFds();

}  // namespace memd::durable
