#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace memd::transfer {

/// How long a chunk that failed transiently waits before its next attempt:
/// `base` doubled for each attempt that failed before (no more doubling
/// after the 20th), times a jitter in [0.5, 1.5) so that chunks failing
/// together do not all come back together. The jitter comes from a
/// xorshift generator it owns, started from `seed`: one seed, one sequence
/// of waits (the engine's is fixed; a test picks its own). Owns nothing
/// else; no errors. Thread-compatible: the engine keeps it under its mutex.
class RetryBackoff {
 public:
  static constexpr std::uint32_t kDefaultSeed = 0x9e3779b9u;

  // A seed of 0 would keep xorshift at 0 for ever: kDefaultSeed instead.
  explicit RetryBackoff(absl::Duration base, std::uint32_t seed = kDefaultSeed);

  // The wait before trying again a chunk whose attempt `attempt` (0 the
  // first) failed. Moves the jitter on.
  absl::Duration After(int attempt);

  // What After(attempt) may return lies in [Shortest, Longest).
  absl::Duration Shortest(int attempt) const { return Doubled(attempt) / 2; }
  absl::Duration Longest(int attempt) const { return Doubled(attempt) * 3 / 2; }

 private:
  absl::Duration Doubled(int attempt) const;

  absl::Duration base_;
  std::uint32_t state_;
};

}  // namespace memd::transfer
