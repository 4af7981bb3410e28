// pool::AccountDevice: a GPU's driver figures beside memd's pool.

#include "daemon/pool/device_memory.h"

#include "gtest/gtest.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

backend::DeviceInfo Gpu(int ordinal, std::uint64_t total, std::optional<std::uint64_t> free) {
  backend::DeviceInfo device;
  device.ordinal = ordinal;
  device.total_bytes = total;
  device.has_free = free.has_value();
  device.free_bytes = free.value_or(0);
  return device;
}

PoolStats PoolAt(Location location, std::uint64_t reserved) {
  PoolStats stats;
  stats.location = location;
  stats.reserved_bytes = reserved;
  return stats;
}

TEST(DeviceMemoryTest, WhatTheDriverCountsUsedBeyondMemdsPoolIsOutsideMemd) {
  // 1000 MiB used: memd's pool holds 600 of it, something else 400.
  const std::vector<PoolStats> pools = {PoolAt(Location::Host(), 5000 * kMiB),
                                        PoolAt(Location::Device(0), 100 * kMiB),
                                        PoolAt(Location::Device(1), 600 * kMiB)};
  const DeviceMemory memory = AccountDevice(Gpu(1, 4000 * kMiB, 3000 * kMiB), pools);
  EXPECT_EQ(memory.ordinal, 1);
  EXPECT_TRUE(memory.has_free);
  EXPECT_EQ(memory.total_bytes, 4000 * kMiB);
  EXPECT_EQ(memory.free_bytes, 3000 * kMiB);
  EXPECT_EQ(memory.memd_bytes, 600 * kMiB) << "the pool of device:1, not device:0's nor host's";
  EXPECT_EQ(memory.outside_memd_bytes, 400 * kMiB);
}

TEST(DeviceMemoryTest, APoolReadAMomentAfterTheDriverNeverMakesOutsideNegative) {
  // The pool grew between the two reads: more than the driver counted used.
  const DeviceMemory memory =
      AccountDevice(Gpu(0, 1000 * kMiB, 900 * kMiB), {PoolAt(Location::Device(0), 300 * kMiB)});
  EXPECT_EQ(memory.memd_bytes, 300 * kMiB);
  EXPECT_EQ(memory.outside_memd_bytes, 0u);
}

TEST(DeviceMemoryTest, ADriverWithoutAFreeQuerySaysNothingOfOutside) {
  const DeviceMemory memory =
      AccountDevice(Gpu(0, 1000 * kMiB, std::nullopt), {PoolAt(Location::Device(0), 300 * kMiB)});
  EXPECT_FALSE(memory.has_free);
  EXPECT_EQ(memory.memd_bytes, 300 * kMiB);
  EXPECT_EQ(memory.free_bytes, 0u);
  EXPECT_EQ(memory.outside_memd_bytes, 0u);
}

TEST(DeviceMemoryTest, AGpuWithoutAPoolHasNothingOfMemds) {
  const DeviceMemory memory = AccountDevice(Gpu(2, 1000 * kMiB, 700 * kMiB), {});
  EXPECT_EQ(memory.memd_bytes, 0u);
  EXPECT_EQ(memory.outside_memd_bytes, 300 * kMiB);
}

}  // namespace
}  // namespace memd::pool
