// Every direction's bytes arrive through the fake device, on the data path
// the memory calls for, with the ring and in-flight bounds kept.

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::test {
namespace {

using transfer::DataPath;
using transfer::Direction;
using transfer::TransferState;

class EngineDeviceTest : public ::testing::Test {
 protected:
  void Start(transfer::EngineOptions options = SmallOptions(), int count = 2) {
    devices_ = std::make_unique<FakeDevices>(count);
    engine_ = StartEngine(*devices_, options);
    ASSERT_NE(engine_, nullptr);
  }
  transfer::TransferProgress Copy(transfer::Endpoint from, transfer::Endpoint to) {
    auto id = engine_->Submit(Spec(1, std::move(from), std::move(to)));
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return {};
    return WaitEnd(*engine_, 1, *id);
  }

  FakeClock clock_;  // For the tests that give it to the engine: outlives it.
  std::unique_ptr<FakeDevices> devices_;
  std::unique_ptr<transfer::Engine> engine_;
};

TEST_F(EngineDeviceTest, PageableHostToDeviceGoesThroughStaging) {
  Start();
  TestBuffer host(9 * kMiB + 17, 1, 1);
  TestBuffer device(9 * kMiB + 17, 2, 2);
  const transfer::TransferProgress done = Copy(Host(host), Device(0, device));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kStaged);
  EXPECT_EQ(done.direction, Direction::kHostToDevice);
  EXPECT_EQ(done.device, 0);
  EXPECT_TRUE(SameBytes(host, 0, device, 0, host.bytes.size()));
  EXPECT_EQ(devices_->states[0]->reused_too_early(), 0);
  EXPECT_LE(devices_->states[0]->max_queued(), SmallOptions().chunks_in_flight);
}

// Staging seconds are the engine clock's: on a clock that moves 1 ms at
// every read and by nothing else, each of the 4 slot fills is timed at
// 1 ms at least (the wall clock would give it a few microseconds).
TEST_F(EngineDeviceTest, StagingTimeIsCountedInTheEnginesClock) {
  clock_.TickOnEveryRead(absl::Milliseconds(1));
  devices_ = std::make_unique<FakeDevices>(1);
  engine_ = StartEngine(*devices_, SmallOptions(), clock_);
  ASSERT_NE(engine_, nullptr);
  TestBuffer host(4 * kMiB, 1, 1);
  TestBuffer device(4 * kMiB, 2, 2);
  ASSERT_EQ(Copy(Host(host), Device(0, device)).state, TransferState::kDone);
  const transfer::DeviceStats stats = engine_->Stats().devices[0];
  EXPECT_GE(stats.staging_seconds, 4 * 0.001);
  EXPECT_GT(stats.dma_seconds, 0);
}

// DMA seconds are the engine clock's too, exactly: the device holds the
// one chunk while the clock moves 1 s, and nothing else moves it.
TEST_F(EngineDeviceTest, DmaTimeIsCountedInTheEnginesClock) {
  devices_ = std::make_unique<FakeDevices>(1);
  engine_ = StartEngine(*devices_, SmallOptions(), clock_);
  ASSERT_NE(engine_, nullptr);
  devices_->states[0]->Hang();
  TestBuffer host(kMiB, 1, 1);
  TestBuffer device(kMiB, 2, 2);
  auto id = engine_->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(PollUntil([&] { return devices_->states[0]->max_queued() == 1; }));
  // Both lanes asleep: the device's has read the clock after its issue.
  ASSERT_TRUE(PollUntil([&] { return clock_.waiters() == 2; }));
  clock_.Advance(absl::Seconds(1));
  devices_->states[0]->Release();
  EXPECT_EQ(WaitEnd(*engine_, 1, *id).state, TransferState::kDone);
  const transfer::DeviceStats stats = engine_->Stats().devices[0];
  EXPECT_EQ(stats.dma_seconds, 1.0);
  EXPECT_EQ(stats.staging_seconds, 0.0);  // The fill took no time in this clock.
}

TEST_F(EngineDeviceTest, RegisteredHostSourceGoesStraightToDma) {
  Start();
  TestBuffer pinned(5 * kMiB, 1, 1);
  TestBuffer device(5 * kMiB, 2, 2);
  const transfer::TransferProgress done = Copy(Host(pinned, /*registered=*/true), Device(1, device));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kDirect);
  EXPECT_EQ(done.device, 1);
  EXPECT_TRUE(SameBytes(pinned, 0, device, 0, pinned.bytes.size()));
  EXPECT_EQ(engine_->Stats().devices[1].staging_seconds, 0);
}

TEST_F(EngineDeviceTest, DeviceToPageableHostDrainsOnlyReachedSlots) {
  Start();
  TestBuffer device(7 * kMiB + 5, 1, 1);
  TestBuffer host(7 * kMiB + 5, 2, 2);
  const transfer::TransferProgress done = Copy(Device(0, device), Host(host));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kStaged);
  EXPECT_EQ(done.direction, Direction::kDeviceToHost);
  // The fake poisons a copy's destination until it lands: a slot drained
  // before its marker would have put 0xDD bytes here.
  EXPECT_TRUE(SameBytes(device, 0, host, 0, host.bytes.size()));
}

// The lane issues the next chunk's DMA between two drains, never drains a
// batch first: draining every finished chunk before issuing left a real GPU
// idle after each batch (d2h 1.74x slower on an H100; docs/benchmarks.md).
// With a fast link, chunks finish while the lane drains, so the old order
// drained two before issuing the next, every time.
TEST_F(EngineDeviceTest, DeviceToPageableHostIssuesTheNextDmaBetweenDrains) {
  transfer::EngineOptions options = SmallOptions();
  options.chunks_in_flight = 2;
  options.staging_slots = 4;
  devices_ = std::make_unique<FakeDevices>(1, FakeLink{.gbps = 1000});
  constexpr std::uint64_t kChunks = 48;
  TestBuffer device(kChunks * kMiB, 1, 1);
  TestBuffer host(kChunks * kMiB, 2, 2);
  // At each DMA out of `device`, the chunks already drained into `host`
  // (the lane drains on its own thread, which is the one enqueuing).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> issued_drained;
  devices_->states[0]->OnEnqueue([&](const void*, const void* source, std::uint64_t) {
    const auto* from = static_cast<const std::byte*>(source);
    if (from < device.bytes.data() || from >= device.bytes.data() + device.bytes.size()) return;
    const std::uint64_t chunk = (from - device.bytes.data()) / kMiB;
    std::uint64_t drained = 0;
    for (std::uint64_t c = 0; c < kChunks; ++c) {
      const std::uint64_t last = (c + 1) * kMiB - 64;  // A drain writes its end last.
      drained += SameBytes(device, last, host, last, 64) ? 1 : 0;
    }
    issued_drained.emplace_back(chunk, drained);
  });
  engine_ = StartEngine(*devices_, options);
  ASSERT_NE(engine_, nullptr);
  const transfer::TransferProgress done = Copy(Device(0, device), Host(host));
  ASSERT_EQ(done.state, TransferState::kDone) << done.status;
  ASSERT_TRUE(SameBytes(device, 0, host, 0, host.bytes.size()));
  ASSERT_EQ(issued_drained.size(), kChunks);
  int batches = 0;
  for (const auto& [chunk, drained] : issued_drained) {
    // Chunk k goes out once chunk k-2 is drained, before k-1 is.
    if (chunk >= 2 && drained > chunk - 1) ++batches;
  }
  EXPECT_EQ(batches, 0) << "chunks issued only after draining the chunk before them";
}

TEST_F(EngineDeviceTest, DeviceToRegisteredHostIsDirect) {
  Start();
  TestBuffer device(3 * kMiB, 1, 1);
  TestBuffer pinned(3 * kMiB, 2, 2);
  const transfer::TransferProgress done = Copy(Device(1, device), Host(pinned, true));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kDirect);
  EXPECT_TRUE(SameBytes(device, 0, pinned, 0, pinned.bytes.size()));
}

TEST_F(EngineDeviceTest, SameDeviceCopyStaysOnTheDevice) {
  Start();
  TestBuffer a(4 * kMiB, 1, 1);
  TestBuffer b(4 * kMiB, 2, 2);
  const transfer::TransferProgress done = Copy(Device(0, a), Device(0, b));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kDevice);
  EXPECT_EQ(done.direction, Direction::kDeviceToDevice);
  EXPECT_TRUE(SameBytes(a, 0, b, 0, a.bytes.size()));
}

TEST_F(EngineDeviceTest, PeerCopyGoesThroughStaging) {
  Start();
  TestBuffer a(6 * kMiB + 3, 1, 1);
  TestBuffer b(6 * kMiB + 3, 2, 2);
  const transfer::TransferProgress done = Copy(Device(0, a), Device(1, b));
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.path, DataPath::kPeerStaged);
  EXPECT_EQ(done.device, 0);
  EXPECT_TRUE(SameBytes(a, 0, b, 0, a.bytes.size()));
  EXPECT_EQ(devices_->states[1]->reused_too_early(), 0);
}

TEST_F(EngineDeviceTest, RingOfOneSlotAndOneChunkInFlightStillMovesEverything) {
  transfer::EngineOptions options = SmallOptions();
  options.staging_slots = 1;
  options.chunks_in_flight = 1;
  options.copy_threads = 1;
  Start(options);
  TestBuffer host(4 * kMiB + 1, 1, 1);
  TestBuffer device(4 * kMiB + 1, 2, 2);
  TestBuffer back(4 * kMiB + 1, 3, 3);
  EXPECT_EQ(Copy(Host(host), Device(0, device)).state, TransferState::kDone);
  EXPECT_EQ(Copy(Device(0, device), Host(back)).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(host, 0, back, 0, host.bytes.size()));
  EXPECT_EQ(devices_->states[0]->max_queued(), 1);
  EXPECT_EQ(devices_->states[0]->reused_too_early(), 0);
}

// The daemon's own chunk size (4 MiB) and 2..4 copy threads: a chunk of whole
// pages and a byte, staged both ways and copied host to host, arrives whole.
// The copy threads' split once left its last byte behind (1 MiB + 1 on two
// threads: two shares of 512 KiB).
TEST_F(EngineDeviceTest, ChunksOfWholePagesAndAByteArriveWholeThroughStagingAndTheCpu) {
  for (int threads : {2, 4}) {
    transfer::EngineOptions options = SmallOptions();
    options.chunk_bytes = 4 * kMiB;
    options.slot_bytes = 4 * kMiB;
    options.copy_threads = threads;
    Start(options, 1);
    for (std::uint64_t size :
         {kMiB + 1, 2 * kMiB + 4097, 4 * kMiB - 4095, 4 * kMiB + kMiB + 1}) {
      SCOPED_TRACE(testing::Message() << threads << " copy threads, " << size << " bytes");
      TestBuffer host(size, 1, 1);
      TestBuffer device(size, 2, 2);
      TestBuffer back(size, 3, 3);
      TestBuffer other(size, 4, 4);
      const transfer::TransferProgress up = Copy(Host(host), Device(0, device));
      EXPECT_EQ(up.state, TransferState::kDone) << up.status;
      EXPECT_EQ(up.path, DataPath::kStaged);
      EXPECT_TRUE(SameBytes(host, 0, device, 0, size)) << "host to device";
      const transfer::TransferProgress down = Copy(Device(0, device), Host(back));
      EXPECT_EQ(down.state, TransferState::kDone) << down.status;
      EXPECT_EQ(down.path, DataPath::kStaged);
      EXPECT_TRUE(SameBytes(device, 0, back, 0, size)) << "device to host";
      const transfer::TransferProgress cpu = Copy(Host(host), Host(other));
      EXPECT_EQ(cpu.state, TransferState::kDone) << cpu.status;
      EXPECT_EQ(cpu.path, DataPath::kCpu);
      EXPECT_TRUE(SameBytes(host, 0, other, 0, size)) << "host to host";
    }
    engine_.reset();
  }
}

TEST_F(EngineDeviceTest, ManyConcurrentCopiesReuseSlotsOnlyAfterTheirMarkers) {
  transfer::EngineOptions options = SmallOptions();
  options.staging_slots = 2;
  Start(options);
  std::vector<std::unique_ptr<TestBuffer>> sources, destinations;
  std::vector<transfer::TransferId> ids;
  for (int i = 0; i < 6; ++i) {
    sources.push_back(std::make_unique<TestBuffer>(3 * kMiB, 10 + i, i));
    destinations.push_back(std::make_unique<TestBuffer>(3 * kMiB, 20 + i, 100 + i));
    auto id = engine_->Submit(Spec(1, Host(*sources[i]), Device(0, *destinations[i])));
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(WaitEnd(*engine_, 1, ids[i]).state, TransferState::kDone);
    EXPECT_TRUE(SameBytes(*sources[i], 0, *destinations[i], 0, 3 * kMiB)) << i;
  }
  EXPECT_EQ(devices_->states[0]->reused_too_early(), 0);
  EXPECT_LE(devices_->states[0]->max_queued(), options.chunks_in_flight);
  EXPECT_EQ(engine_->Stats().devices[0].slots_in_use, 0);
}

TEST_F(EngineDeviceTest, StatsCountFlowsPathsAndSlots) {
  Start();
  TestBuffer host(2 * kMiB, 1, 1);
  TestBuffer device(2 * kMiB, 2, 2);
  TestBuffer other(2 * kMiB, 3, 3);
  Copy(Host(host), Device(0, device));
  Copy(Device(0, device), Host(other));
  Copy(Host(host), Host(other));
  const transfer::EngineStats stats = engine_->Stats();
  std::uint64_t h2d = 0, d2h = 0, h2h = 0;
  for (const transfer::FlowStats& flow : stats.flows) {
    if (flow.direction == Direction::kHostToDevice && flow.device == 0) h2d = flow.bytes;
    if (flow.direction == Direction::kDeviceToHost && flow.device == 0) d2h = flow.bytes;
    if (flow.direction == Direction::kHostToHost && flow.device == -1) h2h = flow.bytes;
    EXPECT_EQ(flow.transfers, 1u);
  }
  EXPECT_EQ(h2d, 2 * kMiB);
  EXPECT_EQ(d2h, 2 * kMiB);
  EXPECT_EQ(h2h, 2 * kMiB);
  EXPECT_EQ(stats.paths.at(DataPath::kStaged), 2u);
  EXPECT_EQ(stats.paths.at(DataPath::kCpu), 1u);
  ASSERT_EQ(stats.devices.size(), 2u);
  EXPECT_EQ(stats.devices[0].slots, SmallOptions().staging_slots);
  EXPECT_EQ(stats.devices[0].slots_in_use, 0);
  EXPECT_TRUE(stats.devices[0].health.ok());
  ASSERT_EQ(stats.priorities.size(), 3u);
  EXPECT_EQ(stats.priorities[1].started, 3u);
  EXPECT_EQ(stats.active_transfers, 0u);
  EXPECT_EQ(stats.active_bytes, 0u);
}

}  // namespace
}  // namespace memd::test
