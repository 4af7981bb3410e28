#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

struct AdmissionLimits {
  std::uint64_t max_session_bytes = 0;
  std::uint64_t max_uid_bytes = 0;
  std::uint64_t max_total_bytes = 0;
  int max_session_transfers = 0;
  int max_uid_transfers = 0;
};

/// Bounds the work the engine accepts: unfinished transfers and their bytes
/// per session and per uid, and their bytes in all, so that a client can
/// queue only so much (never an unbounded queue) and one uid, whatever its
/// number of sessions, leaves the daemon's budget to others. Checked
/// narrowest first (session, uid, daemon), so a refusal names the limit the
/// caller can act on.
/// Thread-compatible: the engine calls it under its mutex.
class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // Charges a transfer of `bytes` to `session` and `uid`, or
  // RESOURCE_EXHAUSTED naming the session, uid or daemon, the numbers and
  // the limit's config key, charging nothing.
  absl::Status Admit(SessionId session, uid_t uid, std::uint64_t bytes);
  // The transfer ended: its bytes and its count go back.
  void Release(SessionId session, uid_t uid, std::uint64_t bytes);

  // What `uid` has unfinished now (zeros for a uid with nothing).
  TransferActivity uid_activity(uid_t uid) const;
  std::uint64_t total_bytes() const { return total_.bytes; }
  std::uint64_t total_transfers() const { return total_.transfers; }
  std::uint64_t rejections() const { return rejections_; }
  // Refusals by the config key of the limit that refused them.
  const std::map<std::string, std::uint64_t>& rejections_by_limit() const {
    return rejections_by_limit_;
  }

 private:
  // Each counts the refusal under `key` (the limit's config key) and says
  // who holds what against which limit.
  absl::Status RefuseCount(const std::string& who, const TransferActivity& charge, int most,
                           const char* key);
  absl::Status RefuseBytes(const std::string& who, const TransferActivity& charge,
                           std::uint64_t bytes, std::uint64_t most, const char* key);
  absl::Status Refuse(const char* key, std::string message);

  AdmissionLimits limits_;
  absl::flat_hash_map<SessionId, TransferActivity> sessions_;
  absl::flat_hash_map<uid_t, TransferActivity> uids_;
  TransferActivity total_;
  std::uint64_t rejections_ = 0;
  std::map<std::string, std::uint64_t> rejections_by_limit_;
};

}  // namespace memd::transfer
