// The Level Zero copy side (ZeCopyDevice, ZeCopyStream) over the project's
// fake driver under the real loader: copies in every direction, markers,
// wakes, many streams, staging, and the backends' copy devices. The fixture
// (ze_copy_fixture.h) runs each test in a child process of its own.

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/backend/combined_backend.h"
#include "gmock/gmock.h"
#include "tests/daemon/backend/ze_copy_fixture.h"
#include "tests/support/poll_until.h"

namespace memd::backend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ZeCopyDeviceTest, CopiesEachDirectionAndTheBytesLandBehindTheMarker) {
  // Poisoned destinations and a modelled 300 ms per copy: a marker that
  // said "reached" early, or bytes read before it, would show.
  if (!Start({{"MEMD_FAKE_ZE_POISON", "1"}, {"MEMD_FAKE_ZE_COPY_LATENCY_US", "300000"}})) return;
  const std::size_t size = 3 * kMiB;
  const std::vector<std::byte> data = Pattern(size, 1);
  std::span<std::byte> staging = Staging(size);
  std::memcpy(staging.data(), data.data(), size);
  const SegmentMemory device = Reserve(Location::Device(0), 4 * kMiB);
  const SegmentMemory copy = Reserve(Location::Device(0), 4 * kMiB);
  std::vector<std::byte> out(size);  // Plain pageable memory: Level Zero copies it too.
  CopyStream& stream = NewStream();

  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), size).ok());
  auto uploaded = stream.Mark();
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_TRUE(Is(stream.Reached(*uploaded), false));
  ASSERT_TRUE(stream.DeviceToDevice(copy.device_address, device.device_address, size).ok());
  ASSERT_TRUE(stream.DeviceToHost(out.data(), copy.device_address, size).ok());
  auto downloaded = stream.Mark();
  ASSERT_TRUE(downloaded.ok());
  EXPECT_TRUE(Is(Await(stream, *uploaded), true));
  EXPECT_TRUE(Is(stream.Reached(*downloaded), false));
  EXPECT_TRUE(Is(Await(stream, *downloaded), true));
  EXPECT_TRUE(Same(out.data(), data.data(), size));
  EXPECT_TRUE(Same(ReadBack(stream, device.device_address, size).data(), data.data(), size));
  EXPECT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(devices_[0]->health().ok());
}

// An event reset while the barrier that signals it is still queued would be
// signalled under its next marker: a marker forgotten before it was reached
// is reused only once the device has passed it.
TEST_F(ZeCopyDeviceTest, AMarkerForgottenEarlyIsNotReusedWhileItsBarrierIsQueued) {
  if (!Start({{"MEMD_FAKE_ZE_COPY_LATENCY_US", "300000"}})) return;
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  std::vector<std::byte> data = Pattern(kMiB, 3);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  auto early = stream.Mark();
  ASSERT_TRUE(early.ok());
  stream.Forget(*early);
  auto next = stream.Mark();
  ASSERT_TRUE(next.ok());
  EXPECT_NE(*next, *early);
  EXPECT_TRUE(Is(stream.Reached(*next), false)) << "the copy's 300 ms cannot have passed";
  EXPECT_TRUE(Is(Await(stream, *next), true));
  // Now that a later barrier ran, the early event is free again.
  auto reused = stream.Mark();
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(*reused, *early);
  EXPECT_TRUE(Is(Await(stream, *reused), true));
}

TEST_F(ZeCopyDeviceTest, MarkersOutgrowOneEventPool) {
  if (!Start()) return;
  CopyStream& stream = NewStream();
  std::vector<Marker> markers;
  for (int i = 0; i < 200; ++i) {
    auto marker = stream.Mark();
    ASSERT_TRUE(marker.ok()) << i << ": " << marker.status();
    markers.push_back(*marker);
  }
  const FakeCounters live = Counters();
  EXPECT_EQ(live.events, before_.events + 200);
  EXPECT_EQ(live.event_pools, before_.event_pools + 4);  // 64 events a pool.
  for (Marker marker : markers) EXPECT_TRUE(Is(Await(stream, marker), true)) << marker;
  std::sort(markers.begin(), markers.end());
  EXPECT_EQ(std::unique(markers.begin(), markers.end()), markers.end());
}

TEST_F(ZeCopyDeviceTest, WakeWhenDoneRunsOnceTheEarlierCopiesLanded) {
  if (!Start({{"MEMD_FAKE_ZE_POISON", "1"}, {"MEMD_FAKE_ZE_COPY_LATENCY_US", "200000"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 4);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  std::vector<std::byte> out(kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
  ASSERT_TRUE(stream.DeviceToHost(out.data(), device.device_address, kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::Notification woken;
  bool landed = false;
  const absl::Time asked = absl::Now();
  ASSERT_TRUE(stream.WakeWhenDone([&] {
    landed = Same(out.data(), data.data(), kMiB);  // Poison (0xa5) until then.
    woken.Notify();
  }).ok());
  // Asking never waits for the copies (400 ms of them).
  EXPECT_LT(absl::Now() - asked, absl::Milliseconds(200));
  EXPECT_FALSE(woken.HasBeenNotified());
  ASSERT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(landed);
  EXPECT_TRUE(Is(stream.Reached(*marker), true));
}

TEST_F(ZeCopyDeviceTest, WakesRunInTheOrderAsked) {
  if (!Start({{"MEMD_FAKE_ZE_COPY_LATENCY_US", "20000"}})) return;
  const std::vector<std::byte> data = Pattern(kMiB, 5);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(stream.HostToDevice(device.device_address, data.data(), kMiB).ok());
    ASSERT_TRUE(stream.WakeWhenDone([&, i] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
    }).ok());
  }
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(test::PollUntil([&] {
    absl::MutexLock lock(&mu);
    return order.size() == 8;
  }));
  absl::MutexLock lock(&mu);
  EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST_F(ZeCopyDeviceTest, ManyStreamsOnTwoGpusCopyAtOnce) {
  if (!Start({{"MEMD_FAKE_ZE_DEVICES", "2"},
              {"MEMD_FAKE_ZE_POISON", "1"},
              {"MEMD_FAKE_ZE_COPY_LATENCY_US", "1000"}})) {
    return;
  }
  constexpr int kStreams = 12;  // Six a GPU: more than either copy group has engines.
  const std::size_t size = kMiB;
  std::vector<SegmentMemory> memory;
  std::vector<CopyStream*> streams;
  for (int i = 0; i < kStreams; ++i) {
    memory.push_back(Reserve(Location::Device(i % 2), 2 * kMiB));
    streams.push_back(&NewStream(i % 2));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kStreams, 0);
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 10; ++round) {
        const std::vector<std::byte> data = Pattern(size, i * 16 + round);
        std::vector<std::byte> out(size);
        CopyStream& stream = *streams[i];
        const DeviceAddress at = memory[i].device_address;
        if (!stream.HostToDevice(at, data.data(), size).ok() ||
            !stream.DeviceToDevice(at + size, at, size).ok() ||
            !stream.DeviceToHost(out.data(), at + size, size).ok()) {
          ++mismatches[i];
          continue;
        }
        absl::StatusOr<Marker> marker = stream.Mark();
        if (!marker.ok() || !Is(Await(stream, *marker), true)) {
          ++mismatches[i];
          continue;
        }
        stream.Forget(*marker);
        if (!Same(out.data(), data.data(), size)) ++mismatches[i];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ::testing::Each(0));
  EXPECT_EQ(Counters().command_lists, before_.command_lists + kStreams);
}

TEST_F(ZeCopyDeviceTest, StagingIsHostMemoryTouchedFreedWithTheDeviceAndRefusedAtZero) {
  if (!Start({{"MEMD_FAKE_ZE_COPY_LATENCY_US", "1000000"}})) return;
  std::span<std::byte> staging = Staging(3 * kMiB + 100);
  ASSERT_EQ(staging.size(), 3 * kMiB + 100);
  std::vector<unsigned char> resident(800);
  ASSERT_EQ(::mincore(staging.data(), staging.size(), resident.data()), 0);
  EXPECT_THAT(std::vector<unsigned char>(resident.begin(), resident.begin() + 769),
              ::testing::Each(::testing::Truly([](unsigned char page) { return page & 1; })));
  EXPECT_EQ(Counters().host_allocations, before_.host_allocations + 1);
  std::memset(staging.data(), 7, staging.size());
  // The copy is asynchronous: its modelled second has not passed.
  const SegmentMemory device = Reserve(Location::Device(0), 4 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), staging.size()).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(stream.Reached(*marker), false));
  EXPECT_EQ(devices_[0]->AllocateStaging(0).status().code(), absl::StatusCode::kInvalidArgument);
  // TearDown checks host_allocations is back where it was.
}

TEST_F(ZeCopyDeviceTest, OutOfHostMemoryForStagingIsResourceExhausted) {
  if (!Start({{"MEMD_FAKE_ZE_FAULTS", "zeMemAllocHost@1=0x70000002"}})) return;
  auto staging = devices_[0]->AllocateStaging(kMiB);
  EXPECT_EQ(staging.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(staging.status().message(), HasSubstr("zeMemAllocHost"));
  EXPECT_THAT(staging.status().message(), HasSubstr("ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"));
  EXPECT_THAT(staging.status().message(), HasSubstr("device 0"));
  EXPECT_TRUE(devices_[0]->AllocateStaging(kMiB).ok());  // The next one works.
  EXPECT_TRUE(devices_[0]->health().ok());
}

// A backend whose only copy device is a stand-in for a CUDA GPU, device:0.
class OneGpuBackend : public Backend {
 public:
  std::string_view name() const override { return "one"; }
  std::vector<Location> locations() const override { return {Location::Host()}; }
  std::uint64_t alignment(const Location&) const override { return 4096; }
  absl::StatusOr<std::unique_ptr<Segment>> Reserve(const Location&, std::uint64_t) override {
    return absl::UnimplementedError("no memory here");
  }
  absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CopyDevices() override {
    class Stub : public CopyDevice {
     public:
      int ordinal() const override { return 0; }
      absl::StatusOr<std::span<std::byte>> AllocateStaging(std::uint64_t) override {
        return absl::UnimplementedError("stub");
      }
      absl::StatusOr<std::unique_ptr<CopyStream>> NewStream() override {
        return absl::UnimplementedError("stub");
      }
      absl::Status health() const override { return absl::OkStatus(); }
    };
    std::vector<std::unique_ptr<CopyDevice>> devices;
    devices.push_back(std::make_unique<Stub>());
    return devices;
  }
};

TEST_F(ZeCopyDeviceTest, BackendsGiveOneCopyDevicePerGpuInTheDaemonsNumbering) {
  if (!Start({{"MEMD_FAKE_ZE_DEVICES", "2"}})) return;
  auto copy_devices = backend_->CopyDevices();
  ASSERT_TRUE(copy_devices.ok()) << copy_devices.status();
  ASSERT_EQ(copy_devices->size(), 2u);
  for (int ordinal = 0; ordinal < 2; ++ordinal) {
    CopyDevice& device = *(*copy_devices)[ordinal];
    EXPECT_EQ(device.ordinal(), ordinal);
    EXPECT_TRUE(device.health().ok());
    auto stream = device.NewStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto marker = (*stream)->Mark();
    ASSERT_TRUE(marker.ok());
    EXPECT_TRUE(Is(Await(**stream, *marker), true));
  }
  copy_devices->clear();
  // Behind one CUDA GPU the Level Zero GPUs are device:1 and device:2.
  auto level_zero = ZeBackend::Create(loader_, /*first_ordinal=*/1);
  ASSERT_TRUE(level_zero.ok()) << level_zero.status();
  CombinedBackend combined(std::make_unique<OneGpuBackend>(), *std::move(level_zero));
  auto all = combined.CopyDevices();
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<int> ordinals;
  for (const auto& device : *all) ordinals.push_back(device->ordinal());
  EXPECT_THAT(ordinals, ElementsAre(0, 1, 2));
}

}  // namespace
}  // namespace memd::backend
