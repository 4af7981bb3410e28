#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/location.h"

namespace memd::broker {

// What a location's memory has, outside what memd's pool there holds.
struct Capacity {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

/// Tells automatic placement how much memory each location has right now
/// beyond its pool: for a GPU what its driver reports free (memory memd's
/// pool holds is not free to the driver), for host and pinned memory what
/// the kernel could still give. The broker adds what the pool holds idle
/// and caps the sum by what the pool's limit lets it reserve
/// (Broker::ResolvePlacement), so a source need not know about pools.
///
/// An interface so that tests set the numbers; the daemon's reads the
/// backend and /proc/meminfo (daemon/placement_capacity.h). Thread-safe:
/// creates call it concurrently, never under the broker's mutex.
class CapacitySource {
 public:
  virtual ~CapacitySource() = default;

  // One entry per location, in order; std::nullopt where it cannot tell
  // (the broker then counts the pool's limit as the only bound).
  virtual std::vector<std::optional<Capacity>> Of(
      const std::vector<Location>& locations) const = 0;
};

}  // namespace memd::broker
