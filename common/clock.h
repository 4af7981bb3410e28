#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memd {

/// The time, injectable so that tests control it. Implementations are
/// thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace memd
