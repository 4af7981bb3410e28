#include "daemon/session/control_connections.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace memd::session {

bool ControlConnections::StillOpen(int fd, const Entry& entry) {
  struct stat now;
  return ::fstat(fd, &now) == 0 && now.st_dev == entry.device &&
         now.st_ino == entry.inode;
}

void ControlConnections::ForgetClosedLocked() {
  for (auto it = by_fd_.begin(); it != by_fd_.end();) {
    if (StillOpen(it->first, it->second)) {
      ++it;
      continue;
    }
    auto count = per_uid_.find(it->second.peer.uid);
    if (--count->second == 0) per_uid_.erase(count);
    by_fd_.erase(it++);
  }
}

absl::Status ControlConnections::Admit(int fd, const PeerCredentials& peer,
                                       const ConnectionLimits& limits) {
  struct stat identity;
  if (::fstat(fd, &identity) != 0) return ErrnoStatus("fstat", errno);
  absl::MutexLock lock(&mu_);
  // A new connection may reuse the number of one gRPC closed; either way,
  // count only the open ones before judging.
  ForgetClosedLocked();
  const std::uint64_t mine = per_uid_.contains(peer.uid) ? per_uid_[peer.uid] : 0;
  if (mine >= limits.per_uid) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", peer.uid, " has ", mine,
        " connections to the control socket; the limit is ", limits.per_uid,
        " (max_connections_per_uid)"));
  }
  if (by_fd_.size() >= limits.total) {
    return absl::ResourceExhaustedError(absl::StrCat(
        by_fd_.size(), " connections to the control socket are open; the limit is ",
        limits.total, " (max_connections)"));
  }
  by_fd_[fd] = Entry{identity.st_dev, identity.st_ino, peer};
  ++per_uid_[peer.uid];
  return absl::OkStatus();
}

std::optional<PeerCredentials> ControlConnections::PeerOf(int fd) const {
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end() || !StillOpen(fd, it->second)) return std::nullopt;
  return it->second.peer;
}

}  // namespace memd::session
