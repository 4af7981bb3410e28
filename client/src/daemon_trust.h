#pragma once

// Whom a client talks to. Before libmemd sends a daemon anything (a call, a
// token, a buffer's bytes) it checks that nobody it does not trust could
// have put the sockets where it looks, and who listens on the session
// socket (SO_PEERCRED). Another user who made /tmp/memd-$UID, or a link in
// it, would otherwise hear every name, token and byte of the session.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::internal {

// Whom the client trusts to run memd: root, its own effective uid, and
// `daemon_uid` when set (ConnectOptions::daemon_uid or MEMD_DAEMON_UID).
struct DaemonTrust {
  uid_t self = 0;
  std::optional<uid_t> daemon_uid;

  bool Trusts(uid_t uid) const {
    return uid == 0 || uid == self || (daemon_uid.has_value() && uid == *daemon_uid);
  }
  // "root, uid 61001 (this process) and uid 998 (MEMD_DAEMON_UID)".
  std::string Describe() const;
};

// One directory on the way to the sockets.
struct DirFacts {
  std::string path;
  uid_t owner = 0;
  mode_t mode = 0;  // st_mode.
};

// Checks that only trusted users could have put anything in the socket
// directory `chain[0]`, or moved it: it is writable by its owner alone, and
// that owner is trusted, or was given the directory by root (its parent,
// `chain[1]`, is root's and writable by root alone, as /run is for a
// systemd RuntimeDirectory); every directory above it (`chain[1..]`, up to
// "/") belongs to a trusted user or the socket directory's owner and, unless
// sticky (/tmp), is writable by its owner alone. Returns the socket
// directory's owner, whom the client may then trust to run memd. Errors:
// PERMISSION_DENIED naming the directory, its owner and mode, and what to
// do.
absl::StatusOr<uid_t> CheckSocketDirChain(const std::vector<DirFacts>& chain,
                                          const DaemonTrust& trust);

// Checks the uid the session socket's listener runs as (SO_PEERCRED):
// trusted, or the socket directory's owner that CheckSocketDirChain
// returned. Errors: PERMISSION_DENIED naming the uid and what to set.
absl::Status CheckDaemonPeer(const std::string& socket_dir, uid_t dir_owner,
                             uid_t peer, const DaemonTrust& trust);

// The facts of the directory open as `dir_fd` (its path: `path`, symbolic
// links resolved) and of each directory above it up to "/". Errors: the
// errno mapping of ErrnoStatus.
absl::StatusOr<std::vector<DirFacts>> DescribeDirChain(int dir_fd,
                                                       const std::string& path);

// MEMD_DAEMON_UID, when set. Errors: INVALID_ARGUMENT when it is not a uid.
absl::StatusOr<std::optional<uid_t>> DaemonUidFromEnvironment();

}  // namespace memd::internal
