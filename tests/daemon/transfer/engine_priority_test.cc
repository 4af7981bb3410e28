// Priorities at chunk boundaries, ageing, and submission order for
// overlapping ranges, through the engine over a slow fake link.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/daemon/transfer/stalling_bytes.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::test {
namespace {

using transfer::Priority;
using transfer::TransferState;

// 1 MiB takes about 2 ms on this link. The tests that say which copy ends
// first run it, and the engine, on a FakeClock: a copy lands only when the
// test has moved the clock past its modelled end, so what is still running
// when another copy ends is the model's answer, whatever the threads' speed.
constexpr FakeLink kSlowLink{0.5, absl::Microseconds(20)};

// What the slow link takes for a copy of `bytes`, as the fake models it.
absl::Duration LinkTime(std::uint64_t bytes) {
  return kSlowLink.latency + absl::Nanoseconds(bytes / kSlowLink.gbps);
}

// Options for a link in fake time: no stall however the test steps the clock.
transfer::EngineOptions SlowLinkOptions() {
  transfer::EngineOptions options = SmallOptions();
  options.stall_timeout = absl::Hours(1);
  return options;
}

// The critical copy is queued while the background copy's chunks hold its
// stream, on a stream of its own, and waits on the link only for the chunk
// there: one background chunk's time and its own after it was queued, it
// has ended and the background copy has moved two chunks of 64.
TEST(EnginePriorityTest, CriticalCopyBehindLongBackgroundCopyFinishesFirst) {
  constexpr std::uint64_t kSmall = kMiB / 2;
  FakeClock clock;
  FakeDevices devices(1, kSlowLink, clock);
  auto engine = StartEngine(devices, SlowLinkOptions(), clock);
  TestBuffer big_host(64 * kMiB, 1, 1);
  TestBuffer big_device(64 * kMiB, 2, 2);
  TestBuffer small_host(kSmall, 3, 3);
  TestBuffer small_device(kSmall, 4, 4);
  absl::Cleanup stop = [&] { StopEngine(engine, clock); };  // Even after a failed assertion;
  // before the buffers go.
  auto background =
      engine->Submit(Spec(1, Host(big_host), Device(0, big_device), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kMiB) == 2; }));
  clock.Advance(LinkTime(kMiB));  // Its first chunk lands.
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }));
  auto critical =
      engine->Submit(Spec(1, Host(small_host), Device(0, small_device), Priority::kCritical));
  ASSERT_TRUE(critical.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kSmall) == 1; }))
      << "the critical copy waited for the background copy's stream";
  clock.Advance(LinkTime(kMiB) + LinkTime(kSmall));
  const transfer::TransferProgress small = WaitEnd(*engine, 1, *critical);
  EXPECT_EQ(small.state, TransferState::kDone);
  const transfer::TransferProgress big_then = *engine->Progress(1, *background);
  EXPECT_EQ(big_then.state, TransferState::kRunning) << "the critical copy waited for the "
                                                        "whole background copy";
  EXPECT_LE(big_then.bytes_done, 2 * kMiB) << "the critical copy waited for more than one chunk";
  ASSERT_TRUE(AdvanceUntil(clock, LinkTime(kMiB), [&] { return Ended(*engine, 1, *background); }));
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(small_host, 0, small_device, 0, kSmall));
  EXPECT_TRUE(SameBytes(big_host, 0, big_device, 0, 64 * kMiB));
}

// A GPU runs what a stream holds in order: a critical copy queued on the
// stream of a background copy's chunks would wait for all of them. It gets
// a stream of its own, where it finds nothing ahead of it, and each probe
// ends one background chunk's time and its own after it was queued.
TEST(EnginePriorityTest, CriticalCopyNeverQueuesBehindOtherChunksOnAStream) {
  constexpr std::uint64_t kSmall = 64 << 10;
  FakeClock clock;
  FakeDevices devices(1, kSlowLink, clock);
  auto engine = StartEngine(devices, SlowLinkOptions(), clock);
  TestBuffer big_host(64 * kMiB, 1, 1);
  TestBuffer big_device(64 * kMiB, 2, 2);
  TestBuffer small_host(kSmall, 3, 3);
  TestBuffer small_device(kSmall, 4, 4);
  absl::Cleanup stop = [&] { StopEngine(engine, clock); };  // Even after a failed assertion;
  // before the buffers go.
  auto background =
      engine->Submit(Spec(1, Host(big_host), Device(0, big_device), Priority::kBackground));
  ASSERT_TRUE(background.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kMiB) == 2; }));
  for (int i = 0; i < 5; ++i) {
    auto critical =
        engine->Submit(Spec(1, Host(small_host), Device(0, small_device), Priority::kCritical));
    ASSERT_TRUE(critical.ok());
    ASSERT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kSmall) == i + 1; }));
    clock.Advance(LinkTime(kMiB) + LinkTime(kSmall));
    EXPECT_EQ(WaitEnd(*engine, 1, *critical).state, TransferState::kDone) << "probe " << i;
  }
  EXPECT_FALSE(Ended(*engine, 1, *background));
  EXPECT_EQ(devices.states[0]->most_queued_ahead(kSmall), 0);
  // The control: the background's chunks do queue behind each other.
  EXPECT_GE(devices.states[0]->most_queued_ahead(kMiB), 1);
  ASSERT_TRUE(AdvanceUntil(clock, LinkTime(kMiB), [&] { return Ended(*engine, 1, *background); }));
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

// A critical copy submitted while the lane fills another class's slot is
// on the device before that fill ends: the lane lets it in between the
// pieces of its share (it used to wait for the whole fill, 0.27-0.48 ms of
// a 4 MiB chunk on the first H100). The background copy's source stalls in
// the middle of its first chunk (userfaultfd) until the critical copy is
// submitted, so the fill is under way when it comes, whatever the threads'
// speed; one copy thread leaves the whole fill to the lane's thread.
TEST(EnginePriorityTest, CriticalCopySubmittedDuringAnotherFillIsQueuedBeforeThatFillEnds) {
  constexpr std::uint64_t kChunk = 4 * kMiB;
  constexpr std::uint64_t kSmall = 64 << 10;
  auto stalling = StallingBytes::Make(kChunk, kMiB);
  if (!stalling.ok()) GTEST_SKIP() << "no userfaultfd here: " << stalling.status();
  TestBuffer expected(kChunk, 1, 1);  // What the stalling source holds once released.
  std::memcpy((*stalling)->data(), expected.data(), kMiB);
  TestBuffer background_device(kChunk, 2, 2);
  TestBuffer small_host(kSmall, 3, 3);
  TestBuffer small_device(kSmall, 4, 4);
  FakeDevices devices(1);
  std::mutex mu;
  std::vector<std::uint64_t> enqueued;  // Copy sizes, in the lane's order.
  devices.states[0]->OnEnqueue([&](const void*, const void*, std::uint64_t bytes) {
    std::lock_guard lock(mu);
    enqueued.push_back(bytes);
  });
  transfer::EngineOptions options = SmallOptions();
  options.chunk_bytes = kChunk;
  options.slot_bytes = kChunk;
  options.copy_threads = 1;
  auto engine = StartEngine(devices, options);
  ASSERT_NE(engine, nullptr);
  absl::Cleanup unstall = [&] { (*stalling)->LetGo(); };  // Before the engine stops.
  transfer::Endpoint source;
  source.memory.host = (*stalling)->data();
  source.length = kChunk;
  source.buffer_id = expected.id;
  auto background = engine->Submit(
      Spec(1, std::move(source), Device(0, background_device), Priority::kBackground));
  ASSERT_TRUE(background.ok()) << background.status();
  ASSERT_TRUE((*stalling)->AwaitRead(kGuard)) << "the lane never read the background's source";
  auto critical =
      engine->Submit(Spec(2, Host(small_host), Device(0, small_device), Priority::kCritical));
  ASSERT_TRUE(critical.ok()) << critical.status();
  ASSERT_TRUE((*stalling)->Release(std::span(expected.bytes).subspan(kMiB)).ok());
  EXPECT_EQ(WaitEnd(*engine, 2, *critical).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(small_host, 0, small_device, 0, kSmall));
  EXPECT_TRUE(SameBytes(expected, 0, background_device, 0, kChunk));
  std::lock_guard lock(mu);
  ASSERT_EQ(enqueued.size(), 2u);
  EXPECT_EQ(enqueued[0], kSmall) << "the critical copy waited for the whole background fill";
  EXPECT_EQ(enqueued[1], kChunk);
}

// Ageing, in the engine's clock: under a stream of critical copies that
// never leaves a gap (and may take every turn: max_critical_run is out of
// reach), a background copy waits while the clock stands still, however
// many criticals pass, and moves once the clock has passed two ageing
// periods (background 2 -> critical 0; its uid then comes first, never
// served).
TEST(EnginePriorityTest, BackgroundCopyProgressesUnderAStreamOfCriticalCopies) {
  constexpr uid_t kCriticalUid = 61002;
  constexpr uid_t kBackgroundUid = 61001;
  FakeClock clock;
  FakeDevices devices(0);
  transfer::EngineOptions options = SmallOptions();
  options.ageing = absl::Milliseconds(1);  // Short: time leaking from the wall would show.
  options.max_critical_run = 1 << 30;
  auto engine = StartEngine(devices, options, clock);
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
    transfer::TransferSpec spec = Spec(2, Host(source), Host(destination), Priority::kCritical);
    spec.uid = kCriticalUid;
    auto id = engine->Submit(std::move(spec));
    if (!id.ok()) return;
    ++criticals;
    (void)engine->Watch(2, *id, again);
  };
  for (int i = 0; i < 3; ++i) again({});
  transfer::TransferSpec spec =
      Spec(1, Host(big_source), Host(big_destination), Priority::kBackground);
  spec.uid = kBackgroundUid;
  auto background = engine->Submit(std::move(spec));
  ASSERT_TRUE(background.ok());
  const int before = criticals.load();
  ASSERT_TRUE(PollUntil([&] { return criticals.load() >= before + 20; }))
      << "the criticals stopped coming back";
  EXPECT_EQ(engine->Progress(1, *background)->bytes_done, 0u)
      << "moved before it aged, with the clock standing still";
  clock.Advance(2 * options.ageing);
  EXPECT_TRUE(PollUntil([&] { return engine->Progress(1, *background)->bytes_done > 0; }))
      << "background starved";
  stop.store(true);
  EXPECT_EQ(WaitEnd(*engine, 1, *background).state, TransferState::kDone);
  engine.reset();  // Before `again` and the buffers go.
}

// Times in the engine's clock, which only the test moves: the later copy's
// first chunk comes after the earlier copy's end in the link's model, not
// by a wall clock that may step.
TEST(EnginePriorityTest, OverlappingWritesRunInSubmissionOrderWhateverThePriority) {
  FakeClock clock;
  FakeDevices devices(1, kSlowLink, clock);
  auto engine = StartEngine(devices, SlowLinkOptions(), clock);
  TestBuffer first(8 * kMiB, 1, 1);
  TestBuffer second(8 * kMiB, 2, 2);
  TestBuffer target(16 * kMiB, 3, 3);
  absl::Cleanup stop = [&] { StopEngine(engine, clock); };  // Even after a failed assertion;
  // before the buffers go.
  auto earlier = engine->Submit(
      Spec(1, Host(first), DeviceAt(0, target, 0, 8 * kMiB), Priority::kBackground));
  ASSERT_TRUE(earlier.ok());
  // Overlaps the earlier write by half: must wait for it despite critical.
  auto later = engine->Submit(
      Spec(1, Host(second), DeviceAt(0, target, 4 * kMiB, 8 * kMiB), Priority::kCritical));
  ASSERT_TRUE(later.ok());
  ASSERT_TRUE(AdvanceUntil(clock, LinkTime(kMiB), [&] {
    return Ended(*engine, 1, *earlier) && Ended(*engine, 1, *later);
  }));
  const transfer::TransferProgress later_done = WaitEnd(*engine, 1, *later);
  const transfer::TransferProgress earlier_done = WaitEnd(*engine, 1, *earlier);
  ASSERT_EQ(earlier_done.state, TransferState::kDone);
  ASSERT_EQ(later_done.state, TransferState::kDone);
  EXPECT_GE(later_done.started, earlier_done.finished);
  EXPECT_GT(earlier_done.finished, earlier_done.started);  // The clock moved between.
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

// The background copy moves 2 MiB chunks, the critical one 1 MiB chunks.
// Whichever the lane issues first, both critical chunks are on the link at
// once and each waits at most for one background chunk there: two of each
// later the critical copy has ended and the background has moved at most
// two chunks of 16.
TEST(EnginePriorityTest, CopiesOfDisjointRangesOvertakeByPriority) {
  constexpr std::uint64_t kBigChunk = 2 * kMiB;
  FakeClock clock;
  FakeDevices devices(1, kSlowLink, clock);
  auto engine = StartEngine(devices, SlowLinkOptions(), clock);
  TestBuffer a(32 * kMiB, 1, 1);
  TestBuffer target(34 * kMiB, 2, 2);
  TestBuffer b(2 * kMiB, 3, 3);
  absl::Cleanup stop = [&] { StopEngine(engine, clock); };  // Even after a failed assertion;
  // before the buffers go.
  transfer::TransferSpec background =
      Spec(1, Host(a), DeviceAt(0, target, 0, 32 * kMiB), Priority::kBackground);
  background.chunk_bytes = kBigChunk;
  auto slow = engine->Submit(std::move(background));
  auto quick = engine->Submit(
      Spec(1, Host(b), DeviceAt(0, target, 32 * kMiB, 2 * kMiB), Priority::kCritical));
  ASSERT_TRUE(slow.ok() && quick.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kMiB) == 2; }));
  clock.Advance(2 * LinkTime(kBigChunk) + 2 * LinkTime(kMiB));
  const transfer::TransferProgress quick_done = WaitEnd(*engine, 1, *quick);
  EXPECT_EQ(quick_done.state, TransferState::kDone);
  const transfer::TransferProgress slow_then = *engine->Progress(1, *slow);
  EXPECT_FALSE(slow_then.terminal());
  EXPECT_LE(slow_then.bytes_done, 2 * kBigChunk);
  ASSERT_TRUE(AdvanceUntil(clock, LinkTime(kBigChunk), [&] { return Ended(*engine, 1, *slow); }));
  EXPECT_EQ(WaitEnd(*engine, 1, *slow).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(a, 0, target, 0, 32 * kMiB));
  EXPECT_TRUE(SameBytes(b, 0, target, 32 * kMiB, 2 * kMiB));
}

}  // namespace
}  // namespace memd::test
