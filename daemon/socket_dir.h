#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace memd {

/// The daemon's claim on its socket directory: creates the directory if
/// needed, holds an exclusive lock on <dir>/memd.lock (with the daemon's pid
/// in it) so that no second daemon serves the same directory, and removes
/// sockets a dead daemon left behind. On destruction it removes the sockets
/// and the lock file. Not thread-safe (start-up and shutdown only).
class SocketDir {
 public:
  // Errors: FAILED_PRECONDITION when a live daemon serves `dir` (its pid in
  // the message), PERMISSION_DENIED / others from the file system.
  static absl::StatusOr<std::unique_ptr<SocketDir>> Claim(const std::string& dir);
  ~SocketDir();

  const std::string& path() const { return dir_; }

 private:
  SocketDir(std::string dir, UniqueFd lock) : dir_(std::move(dir)), lock_(std::move(lock)) {}

  std::string dir_;
  UniqueFd lock_;
};

}  // namespace memd
