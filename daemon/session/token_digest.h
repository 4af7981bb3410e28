#pragma once

#include <string>
#include <string_view>

namespace memd::session {

// SHA-256 of a session token, 32 bytes: what the durable state keeps of a
// session so that its client can re-claim its leases after a restart
// (broker::Broker::Reclaim), without the token itself, a bearer secret,
// lying in the state. Thread-safe.
std::string TokenDigest(std::string_view token);

}  // namespace memd::session
