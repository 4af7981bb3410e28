#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/location.h"
#include "daemon/broker/quota.h"

namespace memd::broker {

// Who is charged for a buffer: its owner's uid and the session that created
// it (while that session lasts), for the memory its allocation takes.
struct Charge {
  uid_t uid = 0;
  std::uint64_t session = 0;
  pid_t pid = 0;  // The session's process, for messages.
  Location location;
  std::uint64_t bytes = 0;  // Pool::AllocationBytes, not the size asked.
};

/// Bytes of live buffers per (uid, location) and per (session, location),
/// checked against the byte quotas (max_uid_bytes, max_session_bytes) before
/// a buffer is created. Owns only the counts; not thread-safe (the broker
/// calls it under its mutex).
class UsageLedger {
 public:
  // OK when `charge` fits both quotas; else RESOURCE_EXHAUSTED saying which
  // quota, what is held, what was asked (`asked`: the buffer's size) and
  // taken, and the limit, and counts the rejection. `name` is the buffer's,
  // for the message.
  absl::Status Admit(const Charge& charge, std::uint64_t asked,
                     const std::string& name, const Quota& uid_quota,
                     const Quota& session_quota);
  void Add(const Charge& charge);
  void Remove(const Charge& charge);
  // The session ended: its buffers stay charged to their uid only.
  void ForgetSession(std::uint64_t session);

  // Bytes and buffers charged, per (uid, location) with any.
  struct Held {
    std::uint64_t bytes = 0;
    std::uint64_t buffers = 0;
  };
  const absl::flat_hash_map<std::pair<uid_t, Location>, Held>& by_uid() const {
    return by_uid_;
  }

  std::uint64_t uid_bytes(uid_t uid, const Location& location) const;
  std::uint64_t session_bytes(std::uint64_t session, const Location& location) const;
  // All locations together. O(entries): for listings, not for the hot path.
  std::uint64_t session_total(std::uint64_t session) const;
  // Rejections since start by quota ("max_uid_bytes", "max_session_bytes")
  // and location.
  const std::map<std::pair<std::string, std::string>, std::uint64_t>& rejections() const {
    return rejections_;
  }

 private:
  absl::flat_hash_map<std::pair<uid_t, Location>, Held> by_uid_;
  absl::flat_hash_map<std::pair<std::uint64_t, Location>, Held> by_session_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> rejections_;
};

}  // namespace memd::broker
