// What a session may hold in the engine (waiting watches, admission's
// bytes and transfers, per session, uid and in all), and how a session and
// the engine end: cancelled, drained (in the engine's FakeClock), forgotten.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "daemon/transfer/retry_backoff.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_failure_fixture.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::test {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using transfer::FailureReason;
using transfer::Priority;
using transfer::TransferState;

// Each watch (a WaitTransfer call) holds memory until its transfer ends: a
// session may have only so many waiting, whatever transfers they watch;
// other sessions are not charged, a cancelled watch frees its place, and a
// reload's new bound applies to the next watch.
TEST_F(EngineFailureTest, WatchesWaitingPerSessionAreBoundedWithTheNumbers) {
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.max_session_watches = 2;
  auto engine = StartEngine(devices, options);
  devices.states[0]->Hang();
  TestBuffer& host = Buffer(kMiB);
  TestBuffer& device = Buffer(kMiB);
  TestBuffer& other_host = Buffer(kMiB);
  TestBuffer& other_device = Buffer(kMiB);
  auto mine = engine->Submit(Spec(1, Host(host), Device(0, device)));
  auto theirs = engine->Submit(Spec(2, Host(other_host), Device(0, other_device)));
  ASSERT_TRUE(mine.ok() && theirs.ok());
  auto ignore = [](const transfer::TransferProgress&) {};
  auto first = engine->Watch(1, *mine, ignore);
  ASSERT_TRUE(first.ok() && engine->Watch(1, *mine, ignore).ok());
  auto refused = engine->Watch(1, *mine, ignore);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), AllOf(HasSubstr("session 1 waits for 2 transfers"),
                                                HasSubstr("max_waits_per_session")));
  auto other = engine->Watch(2, *theirs, ignore);
  EXPECT_TRUE(other.ok()) << "another session was charged";
  EXPECT_TRUE(engine->CancelWatch(*first));
  EXPECT_TRUE(engine->Watch(1, *mine, ignore).ok()) << "a cancelled watch kept its place";
  ASSERT_TRUE(engine->SetMaxSessionWatches(3).ok());  // A reload.
  EXPECT_TRUE(engine->Watch(1, *mine, ignore).ok());
  EXPECT_FALSE(engine->Watch(1, *mine, ignore).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(engine->SetMaxSessionWatches(0)));
  ASSERT_TRUE(engine->SetMaxSessionWatches(4).ok());
  // The end of the transfer runs its three watches and frees their places.
  devices.states[0]->Release();
  EXPECT_EQ(WaitEnd(*engine, 1, *mine).state, TransferState::kDone);
  devices.states[0]->Hang();
  auto again = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(again.ok());
  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < 4; ++i) {
    auto token = engine->Watch(1, *again, ignore);
    ASSERT_TRUE(token.ok()) << "watch " << i << ": " << token.status();
    tokens.push_back(*token);
  }
  for (std::uint64_t token : tokens) EXPECT_TRUE(engine->CancelWatch(token));
  devices.states[0]->Release();
  EXPECT_EQ(WaitEnd(*engine, 1, *again).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 2, *theirs).state, TransferState::kDone);
}

TEST_F(EngineFailureTest, AdmissionRefusesBeyondTheSessionBytesWithTheNumbers) {
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.max_session_bytes = 3 * kMiB;
  auto engine = StartEngine(devices, options);
  devices.states[0]->Hang();
  TestBuffer& a = Buffer(2 * kMiB);
  TestBuffer& b = Buffer(2 * kMiB);
  TestBuffer& c = Buffer(2 * kMiB);
  ASSERT_TRUE(engine->Submit(Spec(7, Host(a), Device(0, b))).ok());
  auto refused = engine->Submit(Spec(7, Host(c), Device(0, a)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "session 7 has 2 MiB in flight; this copy of 2 MiB would exceed the limit of 3 MiB "
            "(transfer_max_session_bytes)");
  // Another session still fits.
  TestBuffer& d = Buffer(2 * kMiB);
  EXPECT_TRUE(engine->Submit(Spec(8, Host(c), Device(0, d))).ok());
  EXPECT_EQ(engine->Stats().admission_rejections, 1u);
  EXPECT_EQ(engine->Stats().active_bytes, 4 * kMiB);
  devices.states[0]->Release();
}

TEST_F(EngineFailureTest, AdmissionRefusesBeyondTheTotalAndTheTransferCount) {
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.max_total_bytes = 3 * kMiB;
  options.max_session_transfers = 2;
  auto engine = StartEngine(devices, options);
  devices.states[0]->Hang();
  TestBuffer& a = Buffer(kMiB);
  TestBuffer& b = Buffer(kMiB);
  TestBuffer& big = Buffer(2 * kMiB);
  TestBuffer& big2 = Buffer(2 * kMiB);
  ASSERT_TRUE(engine->Submit(Spec(1, Host(a), Device(0, b))).ok());
  ASSERT_TRUE(engine->Submit(Spec(1, Host(b), Device(0, a))).ok());
  auto third = engine->Submit(Spec(1, Host(a), Host(b)));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("2 unfinished transfers"));
  auto total = engine->Submit(Spec(2, Host(big), Device(0, big2)));
  EXPECT_EQ(total.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(total.status().message(), HasSubstr("limit of 3 MiB (transfer_max_total_bytes)"));
  devices.states[0]->Release();
}

// Issue 22, finding 3: admission counted per session only, so one uid's
// sessions together filled the daemon's budget.
TEST_F(EngineFailureTest, AdmissionBoundsEachUidAcrossItsSessions) {
  constexpr uid_t kAlice = 61001;
  constexpr uid_t kMallory = 61003;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.max_session_transfers = 2;
  options.max_uid_transfers = 3;
  auto engine = StartEngine(devices, options);
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  const auto of = [](uid_t uid, transfer::TransferSpec spec) {
    spec.uid = uid;
    return spec;
  };
  TestBuffer& host = Buffer(kMiB);
  TestBuffer& device = Buffer(kMiB);
  std::vector<std::pair<transfer::SessionId, transfer::TransferId>> mallorys;
  for (transfer::SessionId session : {1, 1, 2}) {
    auto id = engine->Submit(of(kMallory, Spec(session, Host(host), Device(0, device))));
    ASSERT_TRUE(id.ok()) << id.status();
    mallorys.emplace_back(session, *id);
  }
  auto refused = engine->Submit(of(kMallory, Spec(3, Host(host), Device(0, device))));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "uid 61003 has 3 unfinished transfers; the limit is 3 "
            "(transfer_max_uid_transfers); wait for one to end");
  EXPECT_EQ(engine->UidActivity(kMallory).transfers, 3u);
  EXPECT_EQ(engine->UidActivity(kMallory).bytes, 3 * kMiB);
  EXPECT_EQ(engine->Stats().admission_rejections_by_limit.at("transfer_max_uid_transfers"), 1u);
  TestBuffer& other = Buffer(kMiB);
  auto alice = engine->Submit(of(kAlice, Spec(4, Host(other), Host(Buffer(kMiB)))));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(WaitEnd(*engine, 4, *alice).state, TransferState::kDone);
  EXPECT_EQ(engine->UidActivity(kAlice).transfers, 0u);
  devices.states[0]->Release();
  for (const auto& [session, id] : mallorys) {
    EXPECT_EQ(WaitEnd(*engine, session, id).state, TransferState::kDone);
  }
  EXPECT_EQ(engine->UidActivity(kMallory).transfers, 0u);
  EXPECT_EQ(engine->UidActivity(kMallory).bytes, 0u);
}

// EndSession cancels the session's copies and returns only once their
// chunks on the device have drained. The device keeps them until the test
// has seen EndSession wait in the engine's clock (which stands still, so
// its `drain` bound cannot end the wait either).
TEST_F(EngineFailureTest, EndSessionCancelsDrainsAndForgetsItsTransfers) {
  FakeClock clock;
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions(), clock);
  devices.states[0]->Hang();
  TestBuffer& host = Buffer(32 * kMiB);
  TestBuffer& device = Buffer(32 * kMiB);
  TestBuffer& host2 = Buffer(32 * kMiB);
  TestBuffer& device2 = Buffer(32 * kMiB);
  auto one = engine->Submit(Spec(5, Host(host), Device(0, device)));
  auto two = engine->Submit(Spec(5, Host(host2), Device(0, device2)));
  ASSERT_TRUE(one.ok() && two.ok());
  std::atomic<int> ended{0};
  ASSERT_TRUE(engine->Watch(5, *one, [&](const auto& p) {
                  if (p.state == TransferState::kCancelled) ++ended;
                }).ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  absl::Notification returned;
  std::thread ender([&] {
    engine->EndSession(5, kGuard);
    returned.Notify();
  });
  absl::Cleanup join = [&] {
    devices.states[0]->Release();
    ender.join();
  };
  // Three threads wait in the clock at most: the two lanes and EndSession,
  // which waits only once it has cancelled the session's copies.
  ASSERT_TRUE(PollUntil([&] { return clock.waiters() == 3; })) << clock.waiters();
  EXPECT_FALSE(returned.HasBeenNotified()) << "returned with the session's chunks on the device";
  devices.states[0]->Release();
  ASSERT_TRUE(returned.WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(ended.load(), 1);
  EXPECT_EQ(engine->Progress(5, *one).status().code(), absl::StatusCode::kNotFound);
  const transfer::EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.active_transfers, 0u);
  EXPECT_EQ(stats.devices[0].slots_in_use, 0);
  EXPECT_EQ(stats.failures.at(FailureReason::kSessionEnded), 2u);
}

// What ListTransfers shows (issue 29): the unfinished transfers of a uid,
// or of every uid, oldest first, with the names, locations and offsets
// they were submitted with and their age in the engine's clock; at most as
// many as asked for, the rest counted; none once they ended.
TEST_F(EngineFailureTest, ListShowsAUidsUnfinishedTransfersOldestFirstAndBounded) {
  FakeClock clock;
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions(), clock);
  devices.states[0]->Hang();
  // A failed assertion must not leave the engine's lane hung.
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(4 * kMiB);
  TestBuffer& device = Buffer(4 * kMiB);
  TestBuffer& other = Buffer(kMiB);
  const auto named = [](transfer::Endpoint end, const char* name, const char* location) {
    end.name = name;
    end.location = location;
    return end;
  };
  const auto submit = [&](transfer::SessionId session, uid_t uid, transfer::Endpoint from,
                          transfer::Endpoint to) {
    transfer::TransferSpec spec = Spec(session, std::move(from), std::move(to));
    spec.uid = uid;
    auto id = engine->Submit(std::move(spec));
    EXPECT_TRUE(id.ok()) << id.status();
    clock.Advance(absl::Milliseconds(1));
    return id.value_or(0);
  };
  const transfer::TransferId running = submit(
      5, 1000, named(Host(host), "a/src", "host"), named(Device(0, device), "a/dst", "device:0"));
  // The next two write what the first writes: queued behind it.
  const transfer::TransferId queued =
      submit(5, 1000, named(HostAt(host, kMiB, kMiB), "b/src", "host"),
             named(DeviceAt(0, device, 2 * kMiB, kMiB), "b/dst", "device:0"));
  const transfer::TransferId theirs =
      submit(6, 2000, named(Host(other), "c/src", "pinned"),
             named(DeviceAt(0, device, 0, kMiB), "c/dst", "device:0"));
  ASSERT_TRUE(PollUntil(
      [&] { return engine->Progress(5, running)->state == TransferState::kRunning; }));

  const transfer::TransferListing mine = engine->List(1000, 10);
  ASSERT_EQ(mine.transfers.size(), 2u);
  EXPECT_EQ(mine.omitted, 0u);
  const transfer::ListedTransfer& first = mine.transfers[0];
  EXPECT_EQ(first.progress.id, running);
  EXPECT_EQ(first.progress.state, TransferState::kRunning);
  EXPECT_EQ(first.progress.bytes_total, 4 * kMiB);
  EXPECT_EQ(first.source_name, "a/src");
  EXPECT_EQ(first.destination_location, "device:0");
  EXPECT_EQ(first.session, 5u);
  EXPECT_EQ(first.uid, 1000u);
  EXPECT_EQ(first.age, absl::Milliseconds(3)) << "submitted three advances ago";
  const transfer::ListedTransfer& second = mine.transfers[1];
  EXPECT_EQ(second.progress.id, queued);
  EXPECT_EQ(second.progress.state, TransferState::kQueued);
  EXPECT_EQ(second.progress.bytes_done, 0u);
  EXPECT_EQ(second.source_name, "b/src");
  EXPECT_EQ(second.source_location, "host");
  EXPECT_EQ(second.source_offset, kMiB);
  EXPECT_EQ(second.destination_name, "b/dst");
  EXPECT_EQ(second.destination_offset, 2 * kMiB);
  EXPECT_EQ(second.age, absl::Milliseconds(2));

  const transfer::TransferListing others = engine->List(2000, 10);
  ASSERT_EQ(others.transfers.size(), 1u);
  EXPECT_EQ(others.transfers[0].progress.id, theirs);
  EXPECT_EQ(others.transfers[0].source_location, "pinned");
  EXPECT_TRUE(engine->List(3000, 10).transfers.empty()) << "a uid with no copies";

  const transfer::TransferListing all = engine->List(std::nullopt, 10);
  ASSERT_EQ(all.transfers.size(), 3u);
  EXPECT_EQ(all.transfers[2].progress.id, theirs);
  const transfer::TransferListing bounded = engine->List(std::nullopt, 2);
  ASSERT_EQ(bounded.transfers.size(), 2u);
  EXPECT_EQ(bounded.transfers[0].progress.id, running) << "the oldest are kept";
  EXPECT_EQ(bounded.transfers[1].progress.id, queued);
  EXPECT_EQ(bounded.omitted, 1u);

  std::move(release).Invoke();
  EXPECT_EQ(WaitEnd(*engine, 5, running).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 5, queued).state, TransferState::kDone);
  EXPECT_EQ(WaitEnd(*engine, 6, theirs).state, TransferState::kDone);
  EXPECT_TRUE(engine->List(std::nullopt, 10).transfers.empty()) << "ended: not listed";
}

TEST_F(EngineFailureTest, DestroyingTheEngineCancelsRunningTransfers) {
  // A link slow enough (1 MiB in ~2 ms) that the copies are still running
  // when the engine goes; either end is counted, so how slow is no matter.
  constexpr FakeLink kSlowLink{0.5, absl::Microseconds(20)};
  FakeDevices devices(1, kSlowLink);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer& host = Buffer(64 * kMiB);
  TestBuffer& device = Buffer(64 * kMiB);
  TestBuffer& a = Buffer(64 * kMiB);
  TestBuffer& b = Buffer(64 * kMiB);
  auto to_device = engine->Submit(Spec(1, Host(host), Device(0, device)));
  auto on_host = engine->Submit(Spec(1, Host(a), Host(b)));
  ASSERT_TRUE(to_device.ok() && on_host.ok());
  std::atomic<int> cancelled{0};
  for (transfer::TransferId id : {*to_device, *on_host}) {
    ASSERT_TRUE(engine->Watch(1, id, [&](const auto& p) {
                    if (p.state == TransferState::kCancelled || p.state == TransferState::kDone) {
                      ++cancelled;
                    }
                  }).ok());
  }
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *to_device)->bytes_done > 0; }));
  engine.reset();
  EXPECT_EQ(cancelled.load(), 2);
}

// The engine waits for chunks on a device only so long: up to the stall
// bound in its clock to end the transfer, then as long again for the
// chunks, then gives them up. The device never finishes them.
TEST_F(EngineFailureTest, DestroyingTheEngineWithAHungDeviceReturns) {
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.stall_timeout = absl::Milliseconds(50);
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->Hang();
  TestBuffer& host = Buffer(4 * kMiB);
  TestBuffer& device = Buffer(4 * kMiB);
  ASSERT_TRUE(engine->Submit(Spec(1, Host(host), Device(0, device))).ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Stats().devices[0].slots_in_use > 0; }));
  absl::Notification destroyed;
  std::thread destroyer([&] {
    engine.reset();
    destroyed.Notify();
  });
  // Should the engine never give up, the device lets go, so that the
  // thread ends and the test reports.
  absl::Cleanup join = [&] {
    devices.states[0]->Release();
    destroyer.join();
  };
  EXPECT_TRUE(AdvanceUntil(clock, options.stall_timeout,
                           [&] { return destroyed.HasBeenNotified(); }))
      << "the engine kept waiting for a hung device's chunks";
}

}  // namespace
}  // namespace memd::test
