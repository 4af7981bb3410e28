#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

struct AdmissionLimits {
  std::uint64_t max_session_bytes = 0;
  std::uint64_t max_total_bytes = 0;
  int max_session_transfers = 0;
};

/// Bounds the work the engine accepts: bytes of unfinished transfers per
/// session and in all, and unfinished transfers per session, so that a
/// client can queue only so much (never an unbounded queue).
/// Thread-compatible: the engine calls it under its mutex.
class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // Charges a transfer of `bytes` to `session`, or RESOURCE_EXHAUSTED with
  // the numbers and the limit's config key, charging nothing.
  absl::Status Admit(SessionId session, std::uint64_t bytes);
  // The transfer ended: its bytes and its count go back.
  void Release(SessionId session, std::uint64_t bytes);

  std::uint64_t total_bytes() const { return total_bytes_; }
  std::uint64_t total_transfers() const { return total_transfers_; }
  std::uint64_t rejections() const { return rejections_; }

 private:
  struct Charge {
    std::uint64_t bytes = 0;
    int transfers = 0;
  };

  AdmissionLimits limits_;
  absl::flat_hash_map<SessionId, Charge> sessions_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t total_transfers_ = 0;
  std::uint64_t rejections_ = 0;
};

}  // namespace memd::transfer
