#include "daemon/pool/pool.h"

#include "absl/strings/str_format.h"

namespace memd::pool {

std::string Domain::ToString() const {
  return absl::StrFormat("uid %d gid %d mode 0%o", uid, gid, mode);
}

}  // namespace memd::pool
