#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace memd {

/// The daemon's claim on its socket directory: creates the directory if
/// needed (0755), refuses one that another user owns or that others may
/// write, holds an exclusive lock on <dir>/memd.lock (with the daemon's pid
/// in it) so that no second daemon serves the same directory, and removes
/// sockets a dead daemon left behind. Everything inside is reached through
/// the descriptor of the directory it checked, never following a link, so
/// that nobody can point memd's writes elsewhere. On destruction it removes
/// the sockets and the lock file. Not thread-safe (start-up and shutdown
/// only).
class SocketDir {
 public:
  // Errors: FAILED_PRECONDITION when a live daemon serves `dir` (its pid in
  // the message), or when `dir` is not safe to serve from: a symbolic link,
  // owned by a uid other than the daemon's or root, or writable by group or
  // others (the message names the owner, the mode and what to do);
  // PERMISSION_DENIED / others from the file system.
  static absl::StatusOr<std::unique_ptr<SocketDir>> Claim(const std::string& dir);
  ~SocketDir();

  const std::string& path() const { return dir_; }

  // Creates, binds and listens on a Unix socket of `type` named `name` in
  // the checked directory, with permission bits `mode` (set on the name
  // without following a link). Errors: the errno mapping of ErrnoStatus.
  absl::StatusOr<UniqueFd> Listen(std::string_view name, int type,
                                  unsigned mode, int backlog = 128) const;

 private:
  SocketDir(std::string dir, UniqueFd dir_fd, UniqueFd lock)
      : dir_(std::move(dir)), dir_fd_(std::move(dir_fd)), lock_(std::move(lock)) {}

  // "/proc/self/fd/<dir_fd_>/<name>": a path that resolves through the
  // checked directory itself, whatever happens to `dir_` meanwhile.
  std::string InDir(const std::string& name) const;

  std::string dir_;
  UniqueFd dir_fd_;
  UniqueFd lock_;
};

}  // namespace memd
