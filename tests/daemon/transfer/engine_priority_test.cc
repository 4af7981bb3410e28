// Priorities at chunk boundaries, ageing, and submission order for
// overlapping ranges, through the engine over a slow fake link.

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/support/poll_until.h"

namespace memd::test {
namespace {

using transfer::Priority;
using transfer::TransferState;

// 1 MiB takes about 2 ms on this link: a 64 MiB copy runs for ~130 ms.
constexpr FakeLink kSlowLink{0.5, absl::Microseconds(20)};

TEST(EnginePriorityTest, CriticalCopyBehindLongBackgroundCopyFinishesFirst) {
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer big_host(64 * kMiB, 1, 1);
  TestBuffer big_device(64 * kMiB, 2, 2);
  TestBuffer small_host(kMiB, 3, 3);
  TestBuffer small_device(kMiB, 4, 4);
  auto background =
      engine->Submit(Spec(1, Host(big_host), Device(0, big_device), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }));
  auto critical =
      engine->Submit(Spec(1, Host(small_host), Device(0, small_device), Priority::kCritical));
  ASSERT_TRUE(critical.ok());
  const transfer::TransferProgress small = WaitEnd(*engine, 1, *critical);
  EXPECT_EQ(small.state, TransferState::kDone);
  const transfer::TransferProgress big_then = *engine->Progress(1, *background);
  EXPECT_EQ(big_then.state, TransferState::kRunning) << "the critical copy waited for the "
                                                        "whole background copy";
  EXPECT_LT(big_then.bytes_done, big_then.bytes_total);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(small_host, 0, small_device, 0, kMiB));
  EXPECT_TRUE(SameBytes(big_host, 0, big_device, 0, 64 * kMiB));
}

// A GPU runs what a stream holds in order: a critical copy queued on the
// stream of a background copy's chunks would wait for all of them. It gets
// a stream of its own, where it finds nothing ahead of it.
TEST(EnginePriorityTest, CriticalCopyNeverQueuesBehindOtherChunksOnAStream) {
  constexpr std::uint64_t kSmall = 64 << 10;
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer big_host(64 * kMiB, 1, 1);
  TestBuffer big_device(64 * kMiB, 2, 2);
  TestBuffer small_host(kSmall, 3, 3);
  TestBuffer small_device(kSmall, 4, 4);
  auto background =
      engine->Submit(Spec(1, Host(big_host), Device(0, big_device), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }));
  for (int i = 0; i < 5; ++i) {
    auto critical =
        engine->Submit(Spec(1, Host(small_host), Device(0, small_device), Priority::kCritical));
    ASSERT_TRUE(critical.ok());
    EXPECT_EQ(WaitEnd(*engine, 1, *critical).state, TransferState::kDone);
  }
  EXPECT_FALSE(engine->Progress(1, *background)->terminal()) << "the probes came too late";
  EXPECT_EQ(devices.states[0]->most_queued_ahead(kSmall), 0);
  // The control: the background's chunks do queue behind each other.
  EXPECT_GE(devices.states[0]->most_queued_ahead(kMiB), 1);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(small_host, 0, small_device, 0, kSmall));
  EXPECT_TRUE(SameBytes(big_host, 0, big_device, 0, 64 * kMiB));
}

// Background copies both ways on a device that holds every copy: they take
// three of the four staging slots and leave the last to a critical copy,
// which starts at once instead of waiting for a slot to come back.
TEST(EnginePriorityTest, RingKeepsItsLastFreeSlotForCriticalCopies) {
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.staging_slots = 4;
  options.chunks_in_flight = 2;
  auto engine = StartEngine(devices, options);
  devices.states[0]->Hang();
  TestBuffer in_host(8 * kMiB, 1, 1);
  TestBuffer in_device(8 * kMiB, 2, 2);
  TestBuffer out_device(8 * kMiB, 3, 3);
  TestBuffer out_host(8 * kMiB, 4, 4);
  TestBuffer small_host(kMiB, 5, 5);
  TestBuffer small_device(kMiB, 6, 6);
  auto in = engine->Submit(Spec(1, Host(in_host), Device(0, in_device), Priority::kBackground));
  auto out = engine->Submit(Spec(1, Device(0, out_device), Host(out_host), Priority::kBackground));
  ASSERT_TRUE(in.ok() && out.ok());
  auto slots_in_use = [&] { return engine->Stats().devices.at(0).slots_in_use; };
  ASSERT_TRUE(PollUntil([&] { return slots_in_use() == 3; })) << slots_in_use();
  auto critical =
      engine->Submit(Spec(1, Host(small_host), Device(0, small_device), Priority::kCritical));
  ASSERT_TRUE(critical.ok());
  EXPECT_TRUE(PollUntil([&] {
    return engine->Progress(1, *critical)->state == TransferState::kRunning;
  })) << "the critical copy found no slot";
  EXPECT_EQ(slots_in_use(), 4);
  devices.states[0]->Release();
  EXPECT_EQ(WaitEnd(*engine, 1, *critical).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 1, *in).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 1, *out).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(small_host, 0, small_device, 0, kMiB));
  EXPECT_TRUE(SameBytes(in_host, 0, in_device, 0, 8 * kMiB));
  EXPECT_TRUE(SameBytes(out_device, 0, out_host, 0, 8 * kMiB));
}

// While a critical chunk is on the device the lane fills and drains other
// slots a piece at a time and takes in the critical chunks that ended
// between pieces (also from inside a drain). Both ways at once, every byte
// must still land where it belongs.
TEST(EnginePriorityTest, CriticalCopiesTakenInBetweenPiecesOfOtherFillsKeepEveryByte) {
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.chunk_bytes = 4 * kMiB;
  options.slot_bytes = 4 * kMiB;
  auto engine = StartEngine(devices, options);
  TestBuffer in_host(32 * kMiB, 1, 1);
  TestBuffer in_device(32 * kMiB, 2, 2);
  TestBuffer out_device(32 * kMiB, 3, 3);
  TestBuffer out_host(32 * kMiB, 4, 4);
  auto in = engine->Submit(Spec(1, Host(in_host), Device(0, in_device), Priority::kBackground));
  auto out = engine->Submit(Spec(1, Device(0, out_device), Host(out_host), Priority::kNormal));
  ASSERT_TRUE(in.ok() && out.ok());
  constexpr std::uint64_t kSmall = 256 << 10;
  for (int i = 0; i < 20; ++i) {
    TestBuffer host(kSmall, 10 + 2 * i, 10 + i);
    TestBuffer device(kSmall, 11 + 2 * i, 50 + i);
    const bool up = i % 2 == 0;
    auto critical = engine->Submit(up ? Spec(2, Host(host), Device(0, device), Priority::kCritical)
                                      : Spec(2, Device(0, device), Host(host), Priority::kCritical));
    ASSERT_TRUE(critical.ok());
    EXPECT_EQ(WaitEnd(*engine, 2, *critical).state, TransferState::kDone);
    EXPECT_TRUE(SameBytes(host, 0, device, 0, kSmall)) << "critical copy " << i;
  }
  EXPECT_EQ(WaitEnd(*engine, 1, *in).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 1, *out).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(in_host, 0, in_device, 0, 32 * kMiB));
  EXPECT_TRUE(SameBytes(out_device, 0, out_host, 0, 32 * kMiB));
  EXPECT_EQ(devices.states[0]->reused_too_early(), 0);
}

TEST(EnginePriorityTest, BackgroundCopyProgressesUnderAStreamOfCriticalCopies) {
  FakeDevices devices(0);
  transfer::EngineOptions options = SmallOptions();
  options.ageing = absl::Milliseconds(5);
  auto engine = StartEngine(devices, options);
  TestBuffer big_source(8 * kMiB, 1, 1);
  TestBuffer big_destination(8 * kMiB, 2, 2);
  TestBuffer source(4 * kMiB, 3, 3);
  TestBuffer destination(4 * kMiB, 4, 4);
  // Critical copies queued without a gap, each resubmitted as it ends.
  std::atomic<bool> stop{false};
  std::atomic<int> criticals{0};
  std::function<void(const transfer::TransferProgress&)> again;
  again = [&](const transfer::TransferProgress&) {
    if (stop.load()) return;
    auto id = engine->Submit(Spec(2, Host(source), Host(destination), Priority::kCritical));
    if (!id.ok()) return;
    ++criticals;
    (void)engine->Watch(2, *id, again);
  };
  for (int i = 0; i < 3; ++i) again({});
  // The stream flows (criticals end and come back) before the background
  // copy is even submitted: from then on three criticals are always queued.
  // Waited for, not counted afterwards: on a loaded machine the background
  // could age past the first criticals before any came back.
  ASSERT_TRUE(PollUntil([&] { return criticals.load() > 3; })) << "no critical came back";
  auto background = engine->Submit(
      Spec(1, Host(big_source), Host(big_destination), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  EXPECT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }))
      << "background starved";
  stop.store(true);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  engine.reset();  // Before `again` and the buffers go.
}

TEST(EnginePriorityTest, OverlappingWritesRunInSubmissionOrderWhateverThePriority) {
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer first(8 * kMiB, 1, 1);
  TestBuffer second(8 * kMiB, 2, 2);
  TestBuffer target(16 * kMiB, 3, 3);
  auto earlier = engine->Submit(
      Spec(1, Host(first), DeviceAt(0, target, 0, 8 * kMiB), Priority::kBackground));
  ASSERT_TRUE(earlier.ok());
  // Overlaps the earlier write by half: must wait for it despite critical.
  auto later = engine->Submit(
      Spec(1, Host(second), DeviceAt(0, target, 4 * kMiB, 8 * kMiB), Priority::kCritical));
  ASSERT_TRUE(later.ok());
  const transfer::TransferProgress later_done = WaitEnd(*engine, 1, *later);
  const transfer::TransferProgress earlier_done = WaitEnd(*engine, 1, *earlier);
  ASSERT_EQ(earlier_done.state, TransferState::kDone);
  ASSERT_EQ(later_done.state, TransferState::kDone);
  EXPECT_GE(later_done.started, earlier_done.finished);
  EXPECT_TRUE(SameBytes(first, 0, target, 0, 4 * kMiB));
  EXPECT_TRUE(SameBytes(second, 0, target, 4 * kMiB, 8 * kMiB));
}

TEST(EnginePriorityTest, ReadAfterWriteOfTheSameRangeWaitsForTheWrite) {
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(6 * kMiB, 1, 1);
  TestBuffer device(6 * kMiB, 2, 2);
  TestBuffer back(6 * kMiB, 3, 3);
  auto write = engine->Submit(Spec(1, Host(source), Device(0, device), Priority::kBackground));
  auto read = engine->Submit(Spec(1, Device(0, device), Host(back), Priority::kCritical));
  ASSERT_TRUE(write.ok() && read.ok());
  EXPECT_EQ(WaitEnd(*engine, 1, *read).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 1, *write).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(source, 0, back, 0, 6 * kMiB));
}

TEST(EnginePriorityTest, CopiesOfDisjointRangesOvertakeByPriority) {
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer a(32 * kMiB, 1, 1);
  TestBuffer target(34 * kMiB, 2, 2);
  TestBuffer b(2 * kMiB, 3, 3);
  auto slow = engine->Submit(
      Spec(1, Host(a), DeviceAt(0, target, 0, 32 * kMiB), Priority::kBackground));
  auto quick = engine->Submit(
      Spec(1, Host(b), DeviceAt(0, target, 32 * kMiB, 2 * kMiB), Priority::kCritical));
  ASSERT_TRUE(slow.ok() && quick.ok());
  const transfer::TransferProgress quick_done = WaitEnd(*engine, 1, *quick);
  EXPECT_EQ(quick_done.state, TransferState::kDone);
  EXPECT_FALSE(engine->Progress(1, *slow)->terminal());
  EXPECT_EQ(WaitEnd(*engine, 1, *slow).state, TransferState::kDone);
}

}  // namespace
}  // namespace memd::test
