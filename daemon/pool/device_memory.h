#pragma once

#include <cstdint>
#include <vector>

#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::pool {

// One GPU's memory as its driver and memd's pool each see it, so that an
// operator can tell memory memd holds from memory something else does: other
// processes, the driver's contexts (memd's own too), and memory memd gave
// back that clients' imports still hold, which the driver counts as used
// until the last import lets go ("freed" that did not free anything).
struct DeviceMemory {
  int ordinal = 0;
  std::uint64_t total_bytes = 0;
  // The driver's figures mean something only where it reports free memory
  // (CUDA does; Level Zero 1.4 without Sysman does not).
  bool has_free = false;
  std::uint64_t free_bytes = 0;
  // Reserved by memd's pool for the device: buffers, replicas, idle
  // segments kept for reuse. 0 where memd has no pool there.
  std::uint64_t memd_bytes = 0;
  // total - free - memd_bytes, never below 0 (the driver and the pool are
  // read a moment apart); 0 without has_free.
  std::uint64_t outside_memd_bytes = 0;
};

// Puts the driver's view of `device` beside the pool's for its location
// ("device:N") among `pools`. Pure.
DeviceMemory AccountDevice(const backend::DeviceInfo& device,
                           const std::vector<PoolStats>& pools);

}  // namespace memd::pool
