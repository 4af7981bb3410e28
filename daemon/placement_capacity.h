#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/backend/backend.h"
#include "daemon/broker/capacity.h"

namespace memd {

/// Automatic placement's view of the node's memory outside memd's pools
/// (broker::CapacitySource): a GPU's free and total bytes as its driver
/// reports them now (backend::Backend::devices()), and for host and pinned
/// memory the kernel's MemAvailable and MemTotal (/proc/meminfo). Pinned
/// memory is host memory locked, so both read the same figures; each pool's
/// limit (a quarter and half of what memd may use, by default, cgroup caps
/// included) bounds them further in the broker. Reads both afresh at every
/// call: placement is rare next to the copies it saves, and a cached figure
/// would be wrong exactly when memory is tight.
///
/// Borrows the backend, which must outlive it. Thread-safe (the backend
/// is). Reports std::nullopt for a location it cannot read.
class PlacementCapacity : public broker::CapacitySource {
 public:
  // `meminfo`: the file to read; tests point it at their own.
  explicit PlacementCapacity(const backend::Backend& backend,
                             std::string meminfo = "/proc/meminfo");

  std::vector<std::optional<broker::Capacity>> Of(
      const std::vector<Location>& locations) const override;

 private:
  const backend::Backend& backend_;
  const std::string meminfo_;
};

// MemAvailable and MemTotal of /proc/meminfo's text, in bytes; nullopt
// when either is missing or malformed.
std::optional<broker::Capacity> ParseMeminfo(std::string_view text);

}  // namespace memd
