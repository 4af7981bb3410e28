#pragma once

#include <sys/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "common/unix_socket.h"
#include "daemon/broker/types.h"

namespace memd::broker {

// Whether `peer` may use a buffer with `access`, by its owner and mode the
// way files are checked: owner bits for the owner, group bits for members of
// the owner's group (primary or supplementary), other bits for the rest.
// Root may do anything, as with files.
bool MayAccess(const PeerCredentials& peer, const BufferInfo& buffer,
               Access access);

// Whether uid `caller` may trim the pools (give idle memory back at once):
// root and the daemon's own user (`daemon_uid`) only, since a trim costs
// every client the cached memory. Errors: PERMISSION_DENIED naming both uids.
absl::Status MayTrim(uid_t caller, uid_t daemon_uid);

// Only read and write bits (0666) are meaningful. Errors: INVALID_ARGUMENT
// for any other bit, naming it.
absl::Status ValidateMode(std::uint32_t mode);

}  // namespace memd::broker
