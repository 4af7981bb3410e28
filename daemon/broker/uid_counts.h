#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace memd::broker {

/// What the sessions of each uid hold, against the per-uid limits
/// (max_sessions_per_uid, max_buffers_per_uid, max_leases_per_uid), so that
/// one user's flood costs only that user. Waits are counted by Waiters.
/// Keeps a uid only while it holds something. Thread-compatible: the
/// broker's mutex guards it. Errors: RESOURCE_EXHAUSTED (Admit).
class UidCounts {
 public:
  enum class Kind { kSessions, kBuffers, kLeases };

  // OK when `uid` may take one more of `kind` under `limit`; otherwise
  // RESOURCE_EXHAUSTED with the numbers and the key: "uid 61003 holds 16
  // sessions; the limit is 16 (max_sessions_per_uid)". Counts nothing.
  absl::Status Admit(uid_t uid, Kind kind, std::uint64_t limit) const;

  void Add(uid_t uid, Kind kind);
  // Takes back one Add; a uid left holding nothing is forgotten.
  void Remove(uid_t uid, Kind kind);

  std::uint64_t Of(uid_t uid, Kind kind) const;
  // Uids that hold anything.
  std::size_t uids() const { return by_uid_.size(); }

 private:
  using Held = std::array<std::uint64_t, 3>;  // By Kind.

  absl::flat_hash_map<uid_t, Held> by_uid_;
};

}  // namespace memd::broker
