#include "daemon/session/token_digest.h"

#include <openssl/sha.h>

namespace memd::session {

std::string TokenDigest(std::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

}  // namespace memd::session
