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
  auto background = engine->Submit(
      Spec(1, Host(big_source), Host(big_destination), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  EXPECT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }))
      << "background starved";
  const int during = criticals.load();
  stop.store(true);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  EXPECT_GT(during, 3);
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
