#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/unix_socket.h"

namespace memd::session {

// How many control connections memd keeps: per uid, so that one user's
// flood costs only that user, and in all, so that they fit the daemon's
// descriptor table.
struct ConnectionLimits {
  std::uint64_t per_uid = 64;
  std::uint64_t total = 1024;
};

/// The control socket's connections that memd accepted itself and handed
/// to gRPC, each with the credentials the kernel reported at accept
/// (SO_PEERCRED), so that a call can be bound to its caller: a session
/// token alone is a bearer secret anyone who learns it could present.
///
/// gRPC owns and closes the descriptors without telling anyone, so a
/// connection is known by its descriptor number and its socket's identity
/// (device, inode), and forgotten once that number no longer names that
/// socket. Thread-safe. Errors: RESOURCE_EXHAUSTED (limits, with numbers).
class ControlConnections {
 public:
  // Records connection `fd` of `peer` unless a limit is reached.
  absl::Status Admit(int fd, const PeerCredentials& peer,
                     const ConnectionLimits& limits);

  // The credentials of the connection on `fd`, if memd accepted it and it
  // is still open.
  std::optional<PeerCredentials> PeerOf(int fd) const;

 private:
  struct Entry {
    dev_t device = 0;
    ino_t inode = 0;
    PeerCredentials peer;
  };
  static bool StillOpen(int fd, const Entry& entry);
  void ForgetClosedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Entry> by_fd_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, std::uint64_t> per_uid_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::session
