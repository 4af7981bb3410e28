#include "daemon/pool/device_memory.h"

#include "common/location.h"

namespace memd::pool {

DeviceMemory AccountDevice(const backend::DeviceInfo& device,
                           const std::vector<PoolStats>& pools) {
  DeviceMemory memory;
  memory.ordinal = device.ordinal;
  memory.total_bytes = device.total_bytes;
  memory.has_free = device.has_free;
  memory.free_bytes = device.has_free ? device.free_bytes : 0;
  const Location location = Location::Device(device.ordinal);
  for (const PoolStats& pool : pools) {
    if (pool.location == location) memory.memd_bytes = pool.reserved_bytes;
  }
  if (memory.has_free && memory.free_bytes <= memory.total_bytes) {
    const std::uint64_t used = memory.total_bytes - memory.free_bytes;
    memory.outside_memd_bytes = used > memory.memd_bytes ? used - memory.memd_bytes : 0;
  }
  return memory;
}

}  // namespace memd::pool
