#include "daemon/transfer/retry_backoff.h"

#include <algorithm>

namespace memd::transfer {
namespace {

// Doubling stops here: 2^20 times a millisecond is past any deadline anyway.
constexpr int kMostDoublings = 20;

}  // namespace

RetryBackoff::RetryBackoff(absl::Duration base, std::uint32_t seed)
    : base_(base), state_(seed != 0 ? seed : kDefaultSeed) {}

absl::Duration RetryBackoff::Doubled(int attempt) const {
  return base_ * (std::int64_t{1} << std::clamp(attempt, 0, kMostDoublings));
}

absl::Duration RetryBackoff::After(int attempt) {
  // xorshift32 (Marsaglia): cheap, and a fixed seed keeps tests exact.
  state_ ^= state_ << 13;
  state_ ^= state_ >> 17;
  state_ ^= state_ << 5;
  const double jitter = 0.5 + static_cast<double>(state_ % 1024) / 1024.0;  // [0.5, 1.5)
  return Doubled(attempt) * jitter;
}

}  // namespace memd::transfer
