// Every way a transfer ends other than done: cancel, deadline, stall,
// driver errors (retried or not), a sticky device. Whatever ends by time
// (deadline, stall, retry) runs on a FakeClock the test moves; whatever
// must not happen yet is checked against a later turn of the lane (a probe
// copy it has started) or a thread seen asleep in the fake clock, never
// against a wait. (What a session may hold, and how sessions and the engine
// end: engine_session_test.cc.)

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

// The device keeps the chunks the copy has on it (chunks_in_flight: 2)
// until the test lets them land: the cancel can only be served by
// draining them, whatever the threads' speed.
TEST_F(EngineFailureTest, CancelARunningCopyDrainsItsChunksThenEndsCancelled) {
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions());
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(64 * kMiB);
  TestBuffer& device = Buffer(64 * kMiB);
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  ASSERT_TRUE(engine->Cancel(1, *id).ok());
  // The lane has looked at the cancel; the copy's chunks are still on the
  // device, so it has not ended.
  const transfer::TransferId probe = Probe(*engine, 1);
  EXPECT_EQ(engine->Progress(1, *id)->state, TransferState::kRunning);
  devices.states[0]->Release();
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kCancelled);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kCancelled);
  // The two chunks on the device landed before it ended; no other started.
  EXPECT_EQ(end.bytes_done, 2 * kMiB);
  EXPECT_EQ(WaitEnd(*engine, 1, probe).state, TransferState::kDone);
  EXPECT_EQ(engine->Stats().devices[0].slots_in_use, 0);
  EXPECT_EQ(engine->Stats().failures.at(FailureReason::kCancelled), 1u);
  // Cancelling again changes nothing.
  EXPECT_EQ(engine->Cancel(1, *id)->state, TransferState::kCancelled);
}

TEST_F(EngineFailureTest, CancelAQueuedCopyEndsItWithNoBytesMoved) {
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions());
  devices.states[0]->Hang();  // `first` cannot end before `behind` is cancelled.
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(32 * kMiB);
  TestBuffer& device = Buffer(32 * kMiB);
  TestBuffer& other = Buffer(32 * kMiB);
  auto first = engine->Submit(Spec(1, Host(host), Device(0, device)));
  auto behind = engine->Submit(Spec(1, Host(other), Device(0, device)));  // Waits on `first`.
  ASSERT_TRUE(first.ok() && behind.ok());
  ASSERT_TRUE(engine->Cancel(1, *behind).ok());
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *behind);
  EXPECT_EQ(end.state, TransferState::kCancelled);
  EXPECT_EQ(end.bytes_done, 0u);
  devices.states[0]->Release();
  EXPECT_EQ(WaitEnd(*engine, 1, *first).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(host, 0, device, 0, 32 * kMiB));
}

// The deadline is the engine clock's: the copy (which the hung device
// cannot finish) ends when that clock passes it, not a moment before.
TEST_F(EngineFailureTest, PassedDeadlineEndsDeadlineExceeded) {
  FakeClock clock;
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions(), clock);
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(4 * kMiB);
  TestBuffer& device = Buffer(4 * kMiB);
  transfer::TransferSpec spec = Spec(1, Host(host), Device(0, device));
  spec.deadline = clock.Now() + absl::Milliseconds(30);
  auto id = engine->Submit(spec);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  clock.Advance(absl::Milliseconds(30) - absl::Nanoseconds(1));
  Probe(*engine, 1);
  EXPECT_EQ(engine->Progress(1, *id)->state, TransferState::kRunning) << "ended before its deadline";
  clock.Advance(absl::Nanoseconds(1));
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kFailed);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(end.status.message(), HasSubstr("passed its deadline"));
  EXPECT_EQ(end.finished, spec.deadline);
  EXPECT_EQ(engine->Stats().failures.at(FailureReason::kDeadline), 1u);
}

TEST_F(EngineFailureTest, CopyThatNeverCompletesIsEndedByTheStallTimeout) {
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.stall_timeout = absl::Milliseconds(100);
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(4 * kMiB);
  TestBuffer& device = Buffer(4 * kMiB);
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  const absl::Time issued = clock.Now();
  clock.Advance(options.stall_timeout - absl::Nanoseconds(1));
  Probe(*engine, 1);
  EXPECT_EQ(engine->Progress(1, *id)->state, TransferState::kRunning) << "ended before its stall";
  clock.Advance(absl::Nanoseconds(1));
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kFailed);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(end.status.message(), HasSubstr("stalled: no chunk finished for 100ms"));
  EXPECT_THAT(end.status.message(), HasSubstr("2 chunks still on the device"));
  EXPECT_EQ(end.finished, issued + options.stall_timeout);
  EXPECT_EQ(engine->Stats().failures.at(FailureReason::kStall), 1u);
}

// A transfer ended by the stall timeout still has its chunk on the device,
// which may yet write the destination: a later copy into the same range
// waits until that chunk has drained, or its bytes could be overwritten.
TEST_F(EngineFailureTest, OverlappingCopyWaitsForAStalledCopysChunksToDrain) {
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.stall_timeout = absl::Milliseconds(100);
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& first = Buffer(kMiB);
  TestBuffer& second = Buffer(kMiB);
  TestBuffer& device = Buffer(kMiB);
  auto stalled = engine->Submit(Spec(1, Host(first), Device(0, device)));
  ASSERT_TRUE(stalled.ok());
  auto behind = engine->Submit(Spec(1, Host(second), Device(0, device)));
  ASSERT_TRUE(behind.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 1; }));
  clock.Advance(options.stall_timeout);
  EXPECT_EQ(WaitEnd(*engine, 1, *stalled).status.code(), absl::StatusCode::kDeadlineExceeded);
  // `behind` waited longer than the probe: started by now if it were let go.
  Probe(*engine, 1);
  EXPECT_EQ(engine->Progress(1, *behind)->state, TransferState::kQueued)
      << "started over a chunk still on the device";
  devices.states[0]->Release();
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *behind);
  EXPECT_EQ(end.state, TransferState::kDone) << end.status;
  EXPECT_TRUE(SameBytes(second, 0, device, 0, kMiB));
}

// Ended by the stall timeout, a copy still has its chunk on the device,
// which may yet write the destination: its memory stays (the pins) until
// that chunk drains.
TEST_F(EngineFailureTest, AStalledCopyKeepsItsMemoryUntilItsChunksDrain) {
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.stall_timeout = absl::Milliseconds(100);
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->Hang();
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(kMiB);
  TestBuffer& device = Buffer(kMiB);
  transfer::TransferSpec spec = Spec(1, Host(host), Device(0, device));
  auto pin = std::make_shared<int>(1);
  std::weak_ptr<int> kept = pin;
  spec.destination.pin = std::move(pin);
  auto id = engine->Submit(std::move(spec));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 1; }));
  // Watched from before its end: the engine lets go of what a transfer
  // held before it runs its watches, so had it let go, it would have by
  // the time this one runs.
  auto end = std::make_shared<absl::Notification>();
  ASSERT_TRUE(engine->Watch(1, *id, [end](const auto&) { end->Notify(); }).ok());
  clock.Advance(options.stall_timeout);
  ASSERT_TRUE(end->WaitForNotificationWithTimeout(kGuard));
  EXPECT_EQ(engine->Progress(1, *id)->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(kept.expired()) << "let go with its chunk still on the device";
  devices.states[0]->Release();
  EXPECT_TRUE(PollUntil([&] { return kept.expired(); }));
}

// Chunks 0 and 1 fail at their enqueue; each is tried again once the
// engine's clock has passed its backoff (at most 1.5 x retry_backoff).
TEST_F(EngineFailureTest, TransientEnqueueFailuresAreRetriedAndTheCopySucceeds) {
  FakeClock clock;
  FakeDevices devices(1);
  const transfer::EngineOptions options = SmallOptions();
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->FailEnqueues(
      2, absl::UnavailableError("cuMemcpyHtoDAsync_v2 on device 0: CUDA_ERROR_OUT_OF_MEMORY (2)"));
  TestBuffer& host = Buffer(3 * kMiB);
  TestBuffer& device = Buffer(3 * kMiB);
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *id)->retries == 2; }));
  clock.Advance(transfer::RetryBackoff(options.retry_backoff).Longest(0));
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kDone) << end.status;
  EXPECT_EQ(end.retries, 2u);
  EXPECT_EQ(engine->Stats().retries, 2u);
  EXPECT_TRUE(SameBytes(host, 0, device, 0, 3 * kMiB));
}

TEST_F(EngineFailureTest, TransientErrorAtAMarkerIsRetried) {
  FakeClock clock;
  FakeDevices devices(1);
  const transfer::EngineOptions options = SmallOptions();
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->FailCopies(1, absl::UnavailableError("cuEventQuery: CUDA_ERROR_X"));
  TestBuffer& device = Buffer(3 * kMiB);
  TestBuffer& host = Buffer(3 * kMiB);
  auto id = engine->Submit(Spec(1, Device(0, device), Host(host)));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *id)->retries >= 1; }));
  ASSERT_TRUE(AdvanceUntil(clock, transfer::RetryBackoff(options.retry_backoff).Longest(0),
                           [&] { return Ended(*engine, 1, *id); }));
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kDone) << end.status;
  EXPECT_GE(end.retries, 1u);
  EXPECT_TRUE(SameBytes(device, 0, host, 0, 3 * kMiB));
}

TEST_F(EngineFailureTest, ExhaustedRetriesFailNamingTheChunkOffsetAndDriverCall) {
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.max_retries = 3;
  auto engine = StartEngine(devices, options, clock);
  TestBuffer& host = Buffer(3 * kMiB);
  TestBuffer& device = Buffer(3 * kMiB);
  devices.states[0]->FailEnqueues(
      1000, absl::UnavailableError("cuMemcpyHtoDAsync_v2 on device 0: CUDA_ERROR_OUT_OF_MEMORY (2)"));
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  // Each step lets every retry then waiting come due (the longest backoff
  // of the last attempt); how many steps it takes changes nothing.
  ASSERT_TRUE(AdvanceUntil(clock,
                           transfer::RetryBackoff(options.retry_backoff).Longest(options.max_retries),
                           [&] { return Ended(*engine, 1, *id); }));
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kFailed);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(end.status.message()), ContainsRegex("chunk [0-9]+ at byte offset [0-9]+"));
  EXPECT_THAT(end.status.message(), HasSubstr("after 3 retries"));
  EXPECT_THAT(end.status.message(), HasSubstr("cuMemcpyHtoDAsync_v2"));
  EXPECT_THAT(end.status.message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_EQ(engine->Stats().failures.at(FailureReason::kDriver), 1u);
  EXPECT_EQ(engine->Stats().devices[0].slots_in_use, 0);
}

// A chunk that failed transiently is tried again when the engine's clock
// has passed its backoff, not before: retry_backoff of 1 s with jitter
// puts the first retry in [0.5 s, 1.5 s).
TEST_F(EngineFailureTest, ARetryComesWhenTheClockPassesItsBackoff) {
  constexpr std::uint64_t kChunk = kMiB / 2;  // The copy's one chunk; the probe's are 1 MiB.
  FakeClock clock;
  FakeDevices devices(1);
  transfer::EngineOptions options = SmallOptions();
  options.retry_backoff = absl::Seconds(1);
  const transfer::RetryBackoff backoff(options.retry_backoff);
  auto engine = StartEngine(devices, options, clock);
  devices.states[0]->Hang();  // The retried chunk stays on the device, to be counted.
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  devices.states[0]->FailEnqueues(
      1, absl::UnavailableError("cuMemcpyHtoDAsync_v2 on device 0: CUDA_ERROR_OUT_OF_MEMORY (2)"));
  TestBuffer& host = Buffer(kChunk);
  TestBuffer& device = Buffer(kChunk);
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(PollUntil([&] { return engine->Progress(1, *id)->retries == 1; }));
  // Just short of the shortest backoff: the lane turns (the probe) and
  // passes the chunk over, which it would take before the probe if due.
  clock.Advance(backoff.Shortest(0) - absl::Nanoseconds(1));
  Probe(*engine, 1);
  EXPECT_EQ(devices.states[0]->queued_of(kChunk), 0) << "tried again before its backoff";
  clock.Advance(backoff.Longest(0) - backoff.Shortest(0));
  EXPECT_TRUE(PollUntil([&] { return devices.states[0]->queued_of(kChunk) == 1; }))
      << "not tried again once its backoff had passed";
  devices.states[0]->Release();
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kDone) << end.status;
  EXPECT_EQ(end.retries, 1u);
  EXPECT_TRUE(SameBytes(host, 0, device, 0, kChunk));
}

TEST_F(EngineFailureTest, NonTransientDriverErrorFailsAtOnce) {
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions());
  TestBuffer& host = Buffer(3 * kMiB);
  TestBuffer& device = Buffer(3 * kMiB);
  devices.states[0]->FailCopies(
      1, absl::InvalidArgumentError("cuMemcpyHtoDAsync_v2: CUDA_ERROR_INVALID_VALUE (1)"));
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok());
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kFailed);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(end.retries, 0u);
  EXPECT_THAT(end.status.message(), HasSubstr("chunk 0"));
}

TEST_F(EngineFailureTest, StickyErrorMarksTheDeviceUnhealthyAndFailsItsTransfers) {
  FakeDevices devices(2);
  auto engine = StartEngine(devices, SmallOptions());
  devices.states[0]->Hang();
  TestBuffer& host = Buffer(8 * kMiB);
  TestBuffer& device = Buffer(8 * kMiB);
  TestBuffer& other = Buffer(8 * kMiB);
  auto running = engine->Submit(Spec(1, Host(host), DeviceAt(0, device, 0, 8 * kMiB)));
  auto queued = engine->Submit(Spec(1, Host(other), DeviceAt(0, device, 0, 8 * kMiB)));
  ASSERT_TRUE(running.ok() && queued.ok());
  const absl::Status sticky =
      absl::InternalError("cuEventQuery on device 0: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  devices.states[0]->BreakSticky(sticky);
  for (transfer::TransferId id : {*running, *queued}) {
    const transfer::TransferProgress end = WaitEnd(*engine, 1, id);
    EXPECT_EQ(end.state, TransferState::kFailed);
    EXPECT_EQ(end.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(end.status.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  }
  auto refused = engine->Submit(Spec(1, Host(host), Device(0, device)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("unhealthy"));
  const transfer::EngineStats stats = engine->Stats();
  EXPECT_FALSE(stats.devices[0].health.ok());
  EXPECT_TRUE(stats.devices[1].health.ok());
  EXPECT_EQ(stats.failures.at(FailureReason::kDeviceUnhealthy), 2u);
  // The other device still copies.
  TestBuffer& fine = Buffer(kMiB);
  auto elsewhere = engine->Submit(Spec(1, Host(fine), DeviceAt(1, other, 0, kMiB)));
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(WaitEnd(*engine, 1, *elsewhere).state, TransferState::kDone);
  devices.states[0]->Release();
}

// A broken device's lane has nothing left to do once it has dropped what the
// device held: it sleeps until the engine stops instead of turning (and
// taking the engine's lock) as fast as it can, which cost the daemon a whole
// core for as long as it ran after a sticky GPU error. With the engine's
// clock standing still, a lane that sleeps stays asleep in it: both of the
// engine's threads (the host lane's and this one's) end up waiting there.
// A lane that turned without pause never would.
TEST_F(EngineFailureTest, ABrokenDevicesLaneSleeps) {
  FakeClock clock;
  FakeDevices devices(1);
  auto engine = StartEngine(devices, SmallOptions(), clock);
  devices.states[0]->Hang();
  TestBuffer& host = Buffer(4 * kMiB);
  TestBuffer& device = Buffer(4 * kMiB);
  // A transfer for the lane to find the device broken with: its chunks
  // land after the break, and their wakes send the lane to a broken device.
  auto id = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  devices.states[0]->BreakSticky(
      absl::InternalError("cuEventQuery on device 0: CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  devices.states[0]->Release();
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *id);
  EXPECT_EQ(end.state, TransferState::kFailed);
  EXPECT_EQ(end.status.code(), absl::StatusCode::kFailedPrecondition) << end.status;
  EXPECT_TRUE(PollUntil([&] { return clock.waiters() == 2; }))
      << clock.waiters() << " of the engine's 2 threads asleep: the broken lane turns";
}

// The race the test above loses now and then under load, made certain: the
// device breaks after a chunk's copy is queued and before the marker behind
// it is recorded. The copy never finishes (the device is hung), so a lane
// that waited for it would never end the transfers.
TEST_F(EngineFailureTest, StickyErrorBetweenACopyAndItsMarkerStillFailsTheTransfers) {
  FakeDevices devices(2);
  auto engine = StartEngine(devices, SmallOptions());
  devices.states[0]->Hang();
  // Lets a lane that is stuck on the device go before the engine stops.
  absl::Cleanup release = [&] { devices.states[0]->Release(); };
  TestBuffer& host = Buffer(8 * kMiB);
  TestBuffer& device = Buffer(8 * kMiB);
  TestBuffer& other = Buffer(8 * kMiB);
  auto running = engine->Submit(Spec(1, Host(host), DeviceAt(0, device, 0, 8 * kMiB)));
  auto queued = engine->Submit(Spec(1, Host(other), DeviceAt(0, device, 0, 8 * kMiB)));
  ASSERT_TRUE(running.ok() && queued.ok());
  // `running` fills its stream (chunks_in_flight) and stays there: both
  // copies queued, not only their slots taken.
  ASSERT_TRUE(PollUntil([&] { return devices.states[0]->max_queued() == 2; }));
  // A critical copy has a stream of its own: its chunk is the next copy
  // queued, and the device breaks right behind it.
  devices.states[0]->BreakStickyAfterEnqueues(
      1, absl::InternalError("cuEventRecord on device 0: CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  TestBuffer& urgent_source = Buffer(kMiB);
  TestBuffer& urgent_destination = Buffer(kMiB);
  auto urgent = engine->Submit(
      Spec(1, Host(urgent_source), Device(0, urgent_destination), Priority::kCritical));
  ASSERT_TRUE(urgent.ok());
  for (transfer::TransferId id : {*urgent, *running, *queued}) {
    const transfer::TransferProgress end = WaitEnd(*engine, 1, id);
    ASSERT_EQ(end.state, TransferState::kFailed) << "transfer " << id;
    EXPECT_EQ(end.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(end.status.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  }
  const transfer::EngineStats stats = engine->Stats();
  EXPECT_FALSE(stats.devices[0].health.ok());
  EXPECT_EQ(stats.failures.count(FailureReason::kDeviceUnhealthy)
                ? stats.failures.at(FailureReason::kDeviceUnhealthy)
                : 0,
            3u);
  // The other device still copies, into what `queued` read.
  TestBuffer& fine = Buffer(kMiB);
  auto elsewhere = engine->Submit(Spec(1, Host(fine), DeviceAt(1, other, 0, kMiB)));
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(WaitEnd(*engine, 1, *elsewhere).state, TransferState::kDone);
}

// The same race on the second leg of a copy to another device: the lane of
// the healthy source device queued that leg on the peer's stream, and the
// peer broke before its marker. The peer's own lane fails the transfer; the
// source's lane must not wait for the peer and keeps copying.
TEST_F(EngineFailureTest, PeerBreakingBetweenACopyAndItsMarkerLeavesTheSourceLaneCopying) {
  FakeDevices devices(2);
  auto engine = StartEngine(devices, SmallOptions());
  devices.states[1]->Hang();
  absl::Cleanup release = [&] { devices.states[1]->Release(); };
  devices.states[1]->BreakStickyAfterEnqueues(
      1, absl::InternalError("cuEventRecord on device 1: CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
  TestBuffer& a = Buffer(4 * kMiB);
  TestBuffer& b = Buffer(4 * kMiB);
  auto peer = engine->Submit(Spec(1, Device(0, a), Device(1, b)));
  ASSERT_TRUE(peer.ok());
  const transfer::TransferProgress end = WaitEnd(*engine, 1, *peer);
  EXPECT_EQ(end.state, TransferState::kFailed);
  // The lane that notices first ends it: the peer's (the device is
  // unhealthy) or the source's (the leg's marker failed).
  EXPECT_THAT(end.status.code(), AnyOf(absl::StatusCode::kFailedPrecondition,
                                       absl::StatusCode::kInternal));
  EXPECT_THAT(end.status.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  // Device 0 is healthy and its lane free to move the next copy.
  TestBuffer& host = Buffer(2 * kMiB);
  TestBuffer& device = Buffer(2 * kMiB);
  auto next = engine->Submit(Spec(1, Host(host), Device(0, device)));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(WaitEnd(*engine, 1, *next).state, TransferState::kDone);
  EXPECT_TRUE(SameBytes(host, 0, device, 0, 2 * kMiB));
}

}  // namespace
}  // namespace memd::test
