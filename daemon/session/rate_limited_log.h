#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace memd::session {

/// A warning that a client can trigger at will (a failing accept, a refused
/// connection) logged at most once per interval, with how many were left
/// out since the last line: a flood costs one line a second, not a disk.
/// Not thread-safe.
class RateLimitedLog {
 public:
  explicit RateLimitedLog(absl::Duration interval = absl::Seconds(1))
      : interval_(interval) {}

  // Logs `message` at warning level unless a line went out less than an
  // interval before `now`; then it only counts.
  void Warn(absl::Time now, const std::string& message);

 private:
  const absl::Duration interval_;
  absl::Time last_ = absl::InfinitePast();
  std::uint64_t suppressed_ = 0;
};

}  // namespace memd::session
