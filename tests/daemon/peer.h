#pragma once

#include <sys/types.h>

#include <utility>
#include <vector>

#include "common/unix_socket.h"

namespace memd::test {

// A client as the daemon's socket reports it: pid 4000 + uid, primary
// group `gid`, supplementary `groups`.
inline PeerCredentials Peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  return PeerCredentials{static_cast<pid_t>(4000 + uid), uid, gid, std::move(groups)};
}

// A client whose primary group has its uid's number (as useradd's user
// private groups), and no other group.
inline PeerCredentials Peer(uid_t uid) { return Peer(uid, static_cast<gid_t>(uid)); }

}  // namespace memd::test
