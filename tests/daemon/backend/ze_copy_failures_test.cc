// The Level Zero copy side's failures, from the fake driver's fault
// injection: each ze_result_t becomes the code the transfer engine acts on,
// with a message naming the call, the result and the device; a lost device
// breaks it for good; a hung copy does not hang the stream's destruction.
// The fixture (ze_copy_fixture.h) runs each test in a child process.

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "tests/daemon/backend/ze_copy_fixture.h"

namespace memd::backend {
namespace {

using ::testing::HasSubstr;

TEST_F(ZeCopyDeviceTest, TransientErrorAtTheCallIsUnavailableNamingTheCall) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeCommandListAppendMemoryCopy@1=0x70000002"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 7);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  absl::Status status = stream.HostToDevice(device.device_address, data.data(), kMiB);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("zeCommandListAppendMemoryCopy(host to device"));
  EXPECT_THAT(status.message(), HasSubstr("ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"));
  EXPECT_THAT(status.message(), HasSubstr("device 0"));
  EXPECT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  EXPECT_TRUE(Same(ReadBack(stream, device.device_address, kMiB).data(), data.data(), kMiB));
  EXPECT_TRUE(devices_[0]->health().ok());
}

TEST_F(ZeCopyDeviceTest, BadAddressOrSizeIsInvalidArgument) {
  if (!Start()) return;
  std::vector<std::byte> host(2 * kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  // Ranges that run out of the allocation they start in.
  EXPECT_EQ(stream.HostToDevice(device.device_address + kMiB, host.data(), 2 * kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.DeviceToHost(host.data(), device.device_address + kMiB, 2 * kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status status =
      stream.DeviceToDevice(device.device_address, device.device_address + kMiB, 2 * kMiB);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ZE_RESULT_ERROR_INVALID_ARGUMENT"));
  // No address at all.
  EXPECT_EQ(stream.HostToDevice(0, host.data(), kMiB).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(devices_[0]->health().ok());
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST_F(ZeCopyDeviceTest, OtherErrorAtTheCallIsInternalAndGivesTheEventBack) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeCommandListAppendBarrier@1=0x7ffffffe"}})) return;
  CopyStream& stream = NewStream();
  auto marker = stream.Mark();
  EXPECT_EQ(marker.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(marker.status().message(), HasSubstr("zeCommandListAppendBarrier"));
  EXPECT_THAT(marker.status().message(), HasSubstr("ZE_RESULT_ERROR_UNKNOWN"));
  auto next = stream.Mark();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(Is(Await(stream, *next), true));
  EXPECT_EQ(Counters().events, before_.events + 1);  // The same event, used again.
  EXPECT_TRUE(devices_[0]->health().ok());
}

TEST_F(ZeCopyDeviceTest, EventPoolFailureIsUnavailableAndTheNextMarkWorks) {
  // The backend's own queue made the first event pool.
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeEventPoolCreate@2=0x70000002"}})) return;
  CopyStream& stream = NewStream();
  auto marker = stream.Mark();
  EXPECT_EQ(marker.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(marker.status().message(), HasSubstr("zeEventPoolCreate"));
  auto next = stream.Mark();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(Is(Await(stream, *next), true));
  EXPECT_EQ(Counters().event_pools, before_.event_pools + 1);
}

TEST_F(ZeCopyDeviceTest, ErrorSurfacedByAMarkerIsUnavailableOnce) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeEventQueryStatus@1=0x7ffffffe"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 8);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::StatusOr<bool> reached = stream.Reached(*marker);
  EXPECT_EQ(reached.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reached.status().message(), HasSubstr("zeEventQueryStatus"));
  EXPECT_THAT(reached.status().message(), HasSubstr("ZE_RESULT_ERROR_UNKNOWN"));
  EXPECT_TRUE(devices_[0]->health().ok());  // Not sticky: the marker still works.
  EXPECT_TRUE(Is(Await(stream, *marker), true));
}

TEST_F(ZeCopyDeviceTest, ErrorSurfacedBySynchronizeIsUnavailable) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeEventHostSynchronize@1=0x7ffffffe"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 9);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  absl::Status status = stream.Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("zeEventHostSynchronize"));
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST_F(ZeCopyDeviceTest, DeviceLostBreaksTheDeviceForGood) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeEventQueryStatus@1=0x70000001"}})) return;
  // Nothing waits for this copy: a lost device cannot be waited for.
  const std::vector<std::byte>& data = Kept(Pattern(kMiB, 10));
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  CopyStream& other = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::StatusOr<bool> reached = stream.Reached(*marker);
  EXPECT_EQ(reached.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(reached.status().message(), HasSubstr("ZE_RESULT_ERROR_DEVICE_LOST"));
  EXPECT_THAT(reached.status().message(), HasSubstr("device 0"));
  const absl::Status health = devices_[0]->health();
  EXPECT_EQ(health.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(health.message(), HasSubstr("ZE_RESULT_ERROR_DEVICE_LOST"));
  EXPECT_THAT(health.message(), HasSubstr("restarts"));
  // Every later call says so, the device's other streams' included,
  // without asking the driver again.
  EXPECT_EQ(stream.Reached(*marker).status(), health);
  EXPECT_EQ(stream.HostToDevice(device.device_address, data.data(), kMiB), health);
  EXPECT_EQ(stream.Mark().status(), health);
  EXPECT_EQ(stream.Synchronize(), health);
  EXPECT_EQ(stream.WakeWhenDone([] {}), health);
  EXPECT_EQ(other.DeviceToDevice(device.device_address, device.device_address + kMiB, kMiB),
            health);
  EXPECT_EQ(devices_[0]->NewStream().status(), health);
  EXPECT_EQ(devices_[0]->AllocateStaging(kMiB).status(), health);
}

TEST_F(ZeCopyDeviceTest, DeviceLostSeenByTheWaiterBreaksTheDeviceAndStillWakes) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeEventHostSynchronize@1=0x70000001"}})) return;
  CopyStream& stream = NewStream();
  absl::Notification woken;
  ASSERT_TRUE(stream.WakeWhenDone([&] { woken.Notify(); }).ok());
  // The wake lets the engine look at once, and see the device is gone.
  ASSERT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_THAT(devices_[0]->health().message(), HasSubstr("ZE_RESULT_ERROR_DEVICE_LOST"));
  EXPECT_EQ(stream.Mark().status(), devices_[0]->health());
}

// A device that keeps a copy far longer than the drain allows: destroying
// the stream gives up after the drain timeout, drops the wake it never got
// to (it never runs), and leaves the list and its events to the driver
// rather than wait.
TEST_F(ZeCopyDeviceTest, DestroyingAStreamWithAHungCopyGivesUpAfterTheDrainTimeout) {
  ZeCopyDevice::Options options;
  options.drain_timeout = absl::Milliseconds(100);
  if (!Start({{"MEMD_FAKE_ZE_COPY_LATENCY_US", "5000000"}}, options)) return;
  check_leaks_ = false;  // Left to the driver on purpose.
  const SegmentMemory device = Reserve(Location::Device(0), 4 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.DeviceToDevice(device.device_address, device.device_address + 2 * kMiB,
                                    kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  auto woken = std::make_shared<std::atomic<bool>>(false);
  ASSERT_TRUE(stream.WakeWhenDone([woken] { woken->store(true); }).ok());
  EXPECT_TRUE(Is(stream.Reached(*marker), false));
  const absl::Time start = absl::Now();
  streams_.clear();  // Returns: the drain gives up.
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_FALSE(woken->load());  // The waiter's thread is joined: it never will.
  EXPECT_TRUE(devices_[0]->health().ok());  // A slow device is no driver error.
  EXPECT_EQ(Counters().command_lists, before_.command_lists + 1);
}

TEST_F(ZeCopyDeviceTest, StreamsWithWorkAndWakesLeaveNothingBehind) {
  if (!Start({{"MEMD_FAKE_ZE_COPY_LATENCY_US", "50000"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 11);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  for (int round = 0; round < 3; ++round) {
    CopyStream& stream = NewStream();
    ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
    ASSERT_TRUE(stream.Mark().ok());  // Never forgotten: the stream frees it.
    ASSERT_TRUE(stream.WakeWhenDone([] {}).ok());
    ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  }
  EXPECT_GT(Counters().pending_commands, 0u);
  streams_.clear();  // Each drains its queued copies first.
  ExpectSameLiveObjects(Counters(), before_);
}

}  // namespace
}  // namespace memd::backend
