// The engine's API over host-to-host copies: the bytes arrive, progress,
// watches, cancel, validation and lookups.

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::test {
namespace {

using ::testing::HasSubstr;
using transfer::DataPath;
using transfer::Direction;
using transfer::TransferState;

TEST(EngineHostTest, HostToHostCopyArrivesWithCpuPath) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(5 * kMiB + 123, 1, 1);
  TestBuffer destination(5 * kMiB + 123, 2, 2);
  auto id = engine->Submit(Spec(7, Host(source), Host(destination)));
  ASSERT_TRUE(id.ok()) << id.status();
  const transfer::TransferProgress done = WaitEnd(*engine, 7, *id);
  EXPECT_EQ(done.state, TransferState::kDone) << done.status;
  EXPECT_EQ(done.bytes_done, source.bytes.size());
  EXPECT_EQ(done.bytes_total, source.bytes.size());
  EXPECT_EQ(done.direction, Direction::kHostToHost);
  EXPECT_EQ(done.path, DataPath::kCpu);
  EXPECT_EQ(done.device, -1);
  EXPECT_TRUE(SameBytes(source, 0, destination, 0, source.bytes.size()));
}

// A finished record stays to be asked about, but its memory need not: the
// pins (the broker's: a freed buffer's allocation waits in one) go when the
// transfer ends with nothing left on a device, on the thread that ended it
// once it let go of the engine's mutex (a watch that came after the end may
// run first).
TEST(EngineHostTest, AFinishedCopyLetsGoOfItsMemoryThoughItsRecordStays) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(2 * kMiB, 1, 1);
  TestBuffer destination(2 * kMiB, 2, 2);
  transfer::TransferSpec spec = Spec(7, Host(source), Host(destination));
  auto source_pin = std::make_shared<int>(1);
  auto destination_pin = std::make_shared<int>(2);
  std::weak_ptr<int> source_kept = source_pin;
  std::weak_ptr<int> destination_kept = destination_pin;
  spec.source.pin = std::move(source_pin);
  spec.destination.pin = std::move(destination_pin);
  auto id = engine->Submit(std::move(spec));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(WaitEnd(*engine, 7, *id).state, TransferState::kDone);
  EXPECT_TRUE(PollUntil([&] { return source_kept.expired() && destination_kept.expired(); }));
  auto progress = engine->Progress(7, *id);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->state, TransferState::kDone);
}

// A session's end returns only once what its drained copies held has been
// let go, not some time after on a lane's thread: the broker then frees a
// buffer released under such a copy before the session's leases go, and a
// caller that sees the session gone sees its memory back.
TEST(EngineHostTest, EndSessionReturnsOnlyOnceItsCopiesLetGoOfWhatTheyHeld) {
  FakeClock clock;  // Stands still: EndSession's `drain` bound never ends its wait.
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions(), clock);
  TestBuffer source(2 * kMiB, 1, 1);
  TestBuffer destination(2 * kMiB, 2, 2);
  transfer::TransferSpec spec = Spec(7, Host(source), Host(destination));
  // A pin whose letting go takes until the test says.
  auto letting_go = std::make_shared<absl::Notification>();
  auto let_go = std::make_shared<absl::Notification>();
  spec.destination.pin = std::shared_ptr<const void>(
      new int(0), [letting_go, let_go](const void* pin) {
        letting_go->Notify();
        let_go->WaitForNotification();
        delete static_cast<const int*>(pin);
      });
  ASSERT_TRUE(engine->Submit(std::move(spec)).ok());
  ASSERT_TRUE(letting_go->WaitForNotificationWithTimeout(kGuard)) << "the copy never ended";

  absl::Notification ended;
  std::thread ender([&] {
    engine->EndSession(7, kGuard);
    ended.Notify();
  });
  // The host lane is the thread letting go (held in the pin's deleter), so
  // the one thread that can wait in the clock is EndSession: once it does,
  // it has looked and found the session not drained.
  EXPECT_TRUE(PollUntil([&] { return clock.waiters() == 1; }))
      << "EndSession never waited for the copy to let go";
  EXPECT_FALSE(ended.HasBeenNotified())
      << "the session ended while its copy still held its memory";
  let_go->Notify();
  EXPECT_TRUE(ended.WaitForNotificationWithTimeout(kGuard));
  ender.join();
}

TEST(EngineHostTest, CopyBetweenRangesOfTwoBuffers) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(4 * kMiB, 1, 1);
  TestBuffer destination(4 * kMiB, 2, 2);
  auto id = engine->Submit(Spec(1, HostAt(source, 100, 2 * kMiB), HostAt(destination, 7, 2 * kMiB)));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(WaitEnd(*engine, 1, *id).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(source, 100, destination, 7, 2 * kMiB));
}

TEST(EngineHostTest, ProgressOfAnotherSessionsTransferIsNotFound) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(kMiB, 1, 1);
  TestBuffer destination(kMiB, 2, 2);
  auto id = engine->Submit(Spec(1, Host(source), Host(destination)));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(engine->Progress(1, *id).ok());
  EXPECT_EQ(engine->Progress(2, *id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Cancel(2, *id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Watch(2, *id, [](const auto&) {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Progress(1, *id + 100).status().code(), absl::StatusCode::kNotFound);
  WaitEnd(*engine, 1, *id);  // The buffers go before the engine.
}

TEST(EngineHostTest, WatchOnAnEndedTransferRunsAtOnceOnTheCaller) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(kMiB, 1, 1);
  TestBuffer destination(kMiB, 2, 2);
  auto id = engine->Submit(Spec(1, Host(source), Host(destination)));
  ASSERT_TRUE(id.ok());
  WaitEnd(*engine, 1, *id);
  bool ran = false;
  auto token = engine->Watch(1, *id, [&ran](const auto& progress) {
    ran = progress.state == TransferState::kDone;
  });
  ASSERT_TRUE(token.ok());
  EXPECT_TRUE(ran);
  EXPECT_FALSE(engine->CancelWatch(*token));
}

TEST(EngineHostTest, CancelledWatchNeverRuns) {
  FakeDevices devices(0);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer source(32 * kMiB, 1, 1);
  TestBuffer destination(32 * kMiB, 2, 2);
  auto id = engine->Submit(Spec(1, Host(source), Host(destination)));
  ASSERT_TRUE(id.ok());
  std::atomic<int> runs{0};
  auto token = engine->Watch(1, *id, [&runs](const auto&) { ++runs; });
  ASSERT_TRUE(token.ok());
  const bool cancelled = engine->CancelWatch(*token);
  WaitEnd(*engine, 1, *id);
  EXPECT_EQ(runs.load(), cancelled ? 0 : 1);
}

TEST(EngineHostTest, ValidationErrorsAreSynchronousWithTheNumbers) {
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer a(2 * kMiB, 1, 1);
  TestBuffer b(kMiB, 2, 2);
  auto unequal = engine->Submit(Spec(1, Host(a), Host(b)));
  EXPECT_EQ(unequal.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unequal.status().message(), HasSubstr("2097152"));

  auto empty = engine->Submit(Spec(1, HostAt(a, 0, 0), HostAt(b, 0, 0)));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);

  transfer::TransferSpec small_chunk = Spec(1, HostAt(a, 0, kMiB), Host(b));
  small_chunk.chunk_bytes = 4096;
  auto chunk = engine->Submit(small_chunk);
  EXPECT_EQ(chunk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(chunk.status().message(), HasSubstr("4096"));

  transfer::Endpoint unmapped = Host(b);
  unmapped.memory.host = nullptr;
  EXPECT_EQ(engine->Submit(Spec(1, HostAt(a, 0, kMiB), unmapped)).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto unknown_device = engine->Submit(Spec(1, HostAt(a, 0, kMiB), Device(3, b)));
  EXPECT_EQ(unknown_device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown_device.status().message(), HasSubstr("device 3"));

  auto onto_itself = engine->Submit(Spec(1, HostAt(a, 0, kMiB), HostAt(a, kMiB / 2, kMiB)));
  EXPECT_EQ(onto_itself.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Stats().active_transfers, 0u);
}

TEST(EngineHostTest, StartRefusesOptionsOutOfRange) {
  FakeDevices devices(0);
  transfer::EngineOptions options = SmallOptions();
  options.chunk_bytes = 4 * kMiB;  // Above slot_bytes.
  auto engine = transfer::Engine::Start(devices.Make(), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(engine.status().message(), HasSubstr("chunk_bytes"));
  options = SmallOptions();
  options.copy_threads = transfer::kMaxCopyThreads + 1;
  engine = transfer::Engine::Start(devices.Make(), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(engine.status().message(), HasSubstr("copy_threads is 17"));
  EXPECT_THAT(engine.status().message(), HasSubstr("1 .. 16"));
  options.copy_threads = transfer::kMaxCopyThreads;
  EXPECT_TRUE(transfer::Engine::Start(devices.Make(), options).ok());
  options = SmallOptions();
  options.max_uid_transfers = 0;
  engine = transfer::Engine::Start(devices.Make(), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(engine.status().message(), HasSubstr("max_uid_transfers 0"));
  options = SmallOptions();
  options.max_uid_bytes = 0;
  engine = transfer::Engine::Start(devices.Make(), options);
  EXPECT_THAT(engine.status().message(), HasSubstr("max_uid_bytes 0"));
  options = SmallOptions();
  options.max_critical_run = 0;
  engine = transfer::Engine::Start(devices.Make(), options);
  EXPECT_THAT(engine.status().message(), HasSubstr("max_critical_run 0"));
}

TEST(EngineHostTest, FinishedRecordsBeyondTheKeptNumberAreForgotten) {
  FakeDevices devices(0);
  transfer::EngineOptions options = SmallOptions();
  options.kept_finished_per_session = 2;
  auto engine = StartEngine(devices, options);
  TestBuffer source(kMiB, 1, 1);
  TestBuffer destination(kMiB, 2, 2);
  std::vector<transfer::TransferId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = engine->Submit(Spec(1, Host(source), Host(destination)));
    ASSERT_TRUE(id.ok());
    WaitEnd(*engine, 1, *id);
    ids.push_back(*id);
  }
  EXPECT_EQ(engine->Progress(1, ids[0]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Progress(1, ids[1]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(engine->Progress(1, ids[2]).ok());
  EXPECT_TRUE(engine->Progress(1, ids[3]).ok());
}

}  // namespace
}  // namespace memd::test
