#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"

namespace memd::replay {

struct SimulatedBackendOptions {
  // Segment sizes must be multiples of this (a power of two).
  std::uint64_t alignment = 4096;
  // Reserving beyond this many bytes at once fails as a full node would.
  std::uint64_t capacity_bytes = std::numeric_limits<std::uint64_t>::max();
};

/// A backend without memory, for replaying traces: segments are only
/// numbers, so a trace of terabytes replays on a laptop. Serves one
/// location, device:0. Counts what is reserved (now, at the peak, and how
/// many Reserve calls were made) so that a replay can judge any pool by the
/// same measure. Segments may outlive the backend (they share its
/// counters). Thread-safe.
///
/// Reserve errors: INVALID_ARGUMENT (another location, 0 or unaligned
/// bytes), RESOURCE_EXHAUSTED (beyond the capacity, with the numbers).
/// Segment::Export fails with INTERNAL: there is nothing to export.
class SimulatedBackend : public backend::Backend {
 public:
  explicit SimulatedBackend(SimulatedBackendOptions options);

  std::string_view name() const override { return "simulated"; }
  std::vector<Location> locations() const override { return {location()}; }
  std::uint64_t alignment(const Location& location) const override {
    return options_.alignment;
  }
  absl::StatusOr<std::unique_ptr<backend::Segment>> Reserve(
      const Location& location, std::uint64_t bytes) override;

  static Location location() { return Location::Device(0); }
  std::uint64_t capacity_bytes() const { return options_.capacity_bytes; }

  std::uint64_t reserved_bytes() const;
  std::uint64_t peak_reserved_bytes() const;
  // Every call, successful or not.
  std::uint64_t reserve_calls() const;

 private:
  // Shared with the segments, which give their bytes back on destruction.
  struct Counters {
    absl::Mutex mu;
    std::uint64_t reserved_bytes ABSL_GUARDED_BY(mu) = 0;
    std::uint64_t peak_reserved_bytes ABSL_GUARDED_BY(mu) = 0;
    std::uint64_t reserve_calls ABSL_GUARDED_BY(mu) = 0;
  };
  class SimulatedSegment;

  const SimulatedBackendOptions options_;
  const std::shared_ptr<Counters> counters_;
};

}  // namespace memd::replay
