#pragma once

// What the broker's refusals say, in one place for every file of the broker.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/types.h"

namespace memd::broker {

// A buffer's name as messages quote it.
inline std::string Quoted(const std::string& name) { return absl::StrCat("'", name, "'"); }

// The owner, group and mode are told only to a caller who may read the
// buffer (Stat would tell it them anyway). Anyone else learns that the name
// is taken, which a Create of it would tell them too, and nothing more
// (docs/security.md, "What a client learns of others").
inline absl::Status PermissionDenied(const PeerCredentials& peer, const BufferInfo& buffer,
                                     std::string_view what, std::string_view why = "") {
  std::string message = absl::StrFormat("uid %d may not %s buffer %s", peer.uid,
                                        std::string(what), Quoted(buffer.name));
  if (MayAccess(peer, buffer, Access::kRead)) {
    absl::StrAppendFormat(&message, " (owner uid %d, gid %d, mode 0%o)", buffer.owner_uid,
                          buffer.owner_gid, buffer.mode);
  }
  if (!why.empty()) absl::StrAppend(&message, ": ", std::string(why));
  return absl::PermissionDeniedError(message);
}

}  // namespace memd::broker
