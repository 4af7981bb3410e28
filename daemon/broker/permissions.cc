#include "daemon/broker/permissions.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace memd::broker {

bool MayAccess(const PeerCredentials& peer, const BufferInfo& buffer,
               Access access) {
  if (peer.uid == 0) return true;
  const std::uint32_t wanted = access == Access::kReadWrite ? 06 : 04;
  std::uint32_t granted;
  if (peer.uid == buffer.owner_uid) {
    granted = (buffer.mode >> 6) & 07;
  } else if (peer.gid == buffer.owner_gid ||
             std::find(peer.groups.begin(), peer.groups.end(),
                       buffer.owner_gid) != peer.groups.end()) {
    granted = (buffer.mode >> 3) & 07;
  } else {
    granted = buffer.mode & 07;
  }
  return (granted & wanted) == wanted;
}

absl::Status MayTrim(uid_t caller, uid_t daemon_uid) {
  if (caller == 0 || caller == daemon_uid) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "uid ", caller, " may not trim: only root and the daemon's user (uid ",
      daemon_uid, ") may"));
}

absl::Status ValidateMode(std::uint32_t mode) {
  if ((mode & ~std::uint32_t{0666}) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode 0%o has bits outside 0666 (0%o); buffers take only read and "
        "write bits for owner, group and others",
        mode, mode & ~std::uint32_t{0666}));
  }
  return absl::OkStatus();
}

}  // namespace memd::broker
