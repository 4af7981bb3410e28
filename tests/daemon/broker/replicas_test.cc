// The broker's replicas: copies of a named buffer at other locations, made
// by the first open there through a ReplicaCopier (a fake here, which
// copies when the test says so), shared by later openers, charged to
// whoever asked, refreshed after a writer publishes, and gone with the
// buffer.

#include <string>
#include <vector>

#include "daemon/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/replica_fixture.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;

using ReplicasTest = ReplicaFixture;

TEST_F(ReplicasTest, TheFirstOpenAtALocationMakesOneCopyThatEveryOpenerThereShares) {
  Publish("weights", "the model's bytes");
  bool first_woken = false;
  bool second_woken = false;
  const WatchId first_watch = broker_->NewWatchId();
  const WatchId second_watch = broker_->NewWatchId();
  auto first = OpenAt(alice_, "weights", kDev0, first_watch, &first_woken);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->has_value());  // Waits for the fill it started.
  auto second = OpenAt(bob_, "weights", kDev0, second_watch, &second_woken);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->has_value());  // Waits for the same fill.
  EXPECT_EQ(copier_.started(), 1);

  auto filling = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(filling.ok());
  ASSERT_EQ(filling->replicas.size(), 2u);
  EXPECT_EQ(filling->replicas[1].report.location, kDev0);
  EXPECT_EQ(filling->replicas[1].report.state, ReplicaState::kFilling);

  copier_.Finish();
  EXPECT_TRUE(first_woken);
  EXPECT_TRUE(second_woken);
  auto alice_grant = OpenAt(alice_, "weights", kDev0, first_watch, &first_woken);
  auto bob_grant = OpenAt(bob_, "weights", kDev0, second_watch, &second_woken);
  ASSERT_TRUE(alice_grant.ok() && alice_grant->has_value()) << alice_grant.status();
  ASSERT_TRUE(bob_grant.ok() && bob_grant->has_value()) << bob_grant.status();
  const Grant& a = **alice_grant;
  const Grant& b = **bob_grant;
  EXPECT_EQ(a.buffer.location, kDev0);
  EXPECT_EQ(a.buffer.id, b.buffer.id);  // One copy, both map it.
  EXPECT_EQ(a.access, Access::kRead);
  EXPECT_EQ(Read(a, 17), "the model's bytes");
  EXPECT_EQ(Read(b, 17), "the model's bytes");
  EXPECT_EQ(copier_.started(), 1);

  // A third opener is served at once.
  Grant third = OpenThere(alice_, "weights", kDev0);
  EXPECT_EQ(third.buffer.id, a.buffer.id);
  EXPECT_EQ(copier_.started(), 1);

  auto info = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->location, kHost);  // The home.
  EXPECT_EQ(info->sync_state, "synchronized");
  EXPECT_EQ(info->lease_count, 4u);  // Alice's writer's and 3 at device:0.
  ASSERT_EQ(info->replicas.size(), 2u);
  EXPECT_EQ(info->replicas[1].report.state, ReplicaState::kCurrent);
  EXPECT_EQ(info->replicas[1].report.readers, 3u);
  EXPECT_EQ(broker_->Counts().buffers, 1u);
  EXPECT_EQ(broker_->Counts().replicas, 1u);
  // What metrics show of it (memd_buffers_by_sync_state, memd_replica_*).
  const BrokerCounts counts = broker_->Counts();
  EXPECT_EQ(counts.by_sync_state.at("synchronized"), 1u);
  EXPECT_EQ(counts.by_sync_state.at("host_only"), 0u);
  EXPECT_EQ(counts.replica_copies, 1u);
  EXPECT_EQ(counts.copies_avoided, 2u);  // Bob's open and the third.
  EXPECT_EQ(counts.replica_bytes_copied.at("host_to_device"), 17u);
}

TEST_F(ReplicasTest, ACopyIsChargedToTheUidThatAskedForItNotToTheOwner) {
  Publish("weights", std::string(100000, 'w'));
  OpenThere(bob_, "weights", kDev0);
  EXPECT_GT(UsageOf(kBob, kDev0), 0u);
  EXPECT_EQ(UsageOf(kAlice, kDev0), 0u);
  auto info = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->replicas[1].charged_uid, kBob);
  EXPECT_EQ(copier_.last_uid(), 0u);  // Nothing pending.
}

TEST_F(ReplicasTest, ACopyBeyondTheAskersQuotaIsRefusedBeforeAnythingIsAllocated) {
  BrokerLimits limits;
  auto quota = Quota::Parse("device:0=64KiB");
  ASSERT_TRUE(quota.ok()) << quota.status();
  limits.max_uid_bytes = *quota;
  MakeBroker(limits);
  Publish("weights", std::string(1 << 20, 'w'));
  const int reserved = backend_.reserved();
  bool woken = false;
  auto refused = OpenAt(bob_, "weights", kDev0, broker_->NewWatchId(), &woken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("max_uid_bytes"));
  EXPECT_EQ(backend_.reserved(), reserved);
  EXPECT_EQ(copier_.started(), 0);
}

TEST_F(ReplicasTest, AReaderWhoMayNotReadStartsNoCopyAndLearnsNothing) {
  Publish("private", "secret", 0600);
  bool woken = false;
  auto refused = OpenAt(bob_, "private", kDev0, broker_->NewWatchId(), &woken);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(copier_.started(), 0);
  auto drop = broker_->DropReplica(bob_, "private", kDev0);
  EXPECT_EQ(drop.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ReplicasTest, ASealedBufferOpensReadOnlyAtEveryLocation) {
  Publish("weights", "bytes");
  bool woken = false;
  auto writer = OpenAt(bob_, "weights", kDev0, broker_->NewWatchId(), &woken,
                       Access::kReadWrite);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kPermissionDenied);
  auto own = OpenAt(alice_, "weights", kDev0, broker_->NewWatchId(), &woken, Access::kReadWrite);
  ASSERT_FALSE(own.ok());
  EXPECT_EQ(own.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(copier_.started(), 0);
}

TEST_F(ReplicasTest, AnOpenThatCannotWaitIsToldHowToHaveACopyMade) {
  Publish("weights", "bytes");
  OpenParams params{"weights", Access::kRead};
  params.location = kDev0;
  auto refused = broker_->Open(alice_, params);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("no current copy at device:0"));
  params.location = Location::Pinned();  // No pinned pool here.
  EXPECT_EQ(broker_->Open(alice_, params).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReplicasTest, AFailedFillEndsItsStartersOpenWithTheReasonAndTheBufferStaysUsable) {
  Publish("weights", "bytes");
  bool starter_woken = false;
  bool other_woken = false;
  const WatchId starter = broker_->NewWatchId();
  const WatchId other = broker_->NewWatchId();
  ASSERT_TRUE(OpenAt(alice_, "weights", kDev0, starter, &starter_woken).ok());
  ASSERT_TRUE(OpenAt(bob_, "weights", kDev0, other, &other_woken).ok());
  copier_.Finish(absl::InternalError("cuMemcpyHtoDAsync: CUDA_ERROR_ILLEGAL_ADDRESS"));
  ASSERT_TRUE(starter_woken);
  auto failed = OpenAt(alice_, "weights", kDev0, starter, &starter_woken);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("copying buffer 'weights' to device:0 failed: cuMemcpyHtoDAsync"));
  auto info = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->replicas.size(), 1u);
  EXPECT_THAT(info->fill_failure, HasSubstr("copy to device:0 (generation 1) failed"));
  EXPECT_EQ(broker_->Counts().replicas, 0u);
  // The other opener tries again: its own fill.
  ASSERT_TRUE(other_woken);
  auto retried = OpenAt(bob_, "weights", kDev0, other, &other_woken);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_FALSE(retried->has_value());
  EXPECT_EQ(copier_.started(), 2);
  // And the home serves all along.
  OpenParams home{"weights", Access::kRead};
  EXPECT_TRUE(broker_->Open(bob_, home).ok());
}

TEST_F(ReplicasTest, ACopierThatRefusesFailsTheOpenAtOnceAndFreesTheCopy) {
  Publish("weights", "bytes");
  copier_.Refuse(absl::ResourceExhaustedError("transfer_max_uid_bytes"));
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto first = OpenAt(bob_, "weights", kDev0, watch, &woken);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(woken);
  auto failed = OpenAt(bob_, "weights", kDev0, watch, &woken);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(broker_->Counts().replicas, 0u);
  EXPECT_EQ(UsageOf(kBob, kDev0), 0u);
}

TEST_F(ReplicasTest, UnlinkOrphansTheCopiesWhichGoWithTheirLastLease) {
  Publish("weights", "bytes");
  Grant copy = OpenThere(bob_, "weights", kDev0);
  ASSERT_TRUE(broker_->Unlink(alice_, "weights").ok());
  EXPECT_EQ(broker_->Counts().replicas, 1u);  // Bob still maps it.
  EXPECT_GT(UsageOf(kBob, kDev0), 0u);
  ASSERT_TRUE(broker_->Release(bob_, copy.lease).ok());
  EXPECT_EQ(broker_->Counts().replicas, 0u);
  EXPECT_EQ(UsageOf(kBob, kDev0), 0u);
}

TEST_F(ReplicasTest, AnUnlinkDuringAFillCancelsItAndFreesTheCopyWhenTheCopyLetsGo) {
  std::vector<BufferId> cancelled;
  broker_->SetFreedWhileWritten([&](BufferId id) { cancelled.push_back(id); });
  Publish("weights", "bytes");
  bool woken = false;
  ASSERT_TRUE(OpenAt(bob_, "weights", kDev0, broker_->NewWatchId(), &woken).ok());
  ASSERT_TRUE(broker_->Unlink(alice_, "weights").ok());
  EXPECT_EQ(cancelled.size(), 1u);  // The copy nobody can open any more.
  EXPECT_EQ(broker_->Counts().replicas, 1u);  // Parked under the fill.
  copier_.Finish(absl::CancelledError("cancelled"));
  EXPECT_EQ(broker_->Counts().replicas, 0u);
  EXPECT_EQ(UsageOf(kBob, kDev0), 0u);
}

TEST_F(ReplicasTest, DropRemovesAnUnheldCopyAndRefusesEverythingElse) {
  Publish("weights", "bytes");
  Grant held = OpenThere(bob_, "weights", kDev0);
  EXPECT_EQ(broker_->DropReplica(alice_, "weights", kHost).status().code(),
            absl::StatusCode::kFailedPrecondition);  // The home.
  EXPECT_EQ(broker_->DropReplica(alice_, "weights", kDev1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->DropReplica(alice_, "weights", kDev0).status().code(),
            absl::StatusCode::kFailedPrecondition);  // Leased.
  SessionId carol = Start(1002);
  auto stranger = broker_->DropReplica(carol, "weights", kDev0);
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(stranger.status().message(), HasSubstr("charged to (uid 1001)"));
  ASSERT_TRUE(broker_->Release(bob_, held.lease).ok());
  auto dropped = broker_->DropReplica(bob_, "weights", kDev0);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->replicas.size(), 1u);
  EXPECT_EQ(dropped->sync_state, "host_only");
  EXPECT_EQ(UsageOf(kBob, kDev0), 0u);
  EXPECT_EQ(broker_->Counts().replicas, 0u);
}

TEST_F(ReplicasTest, APrefetchMakesTheCopyAndGrantsNothing) {
  Publish("weights", "bytes");
  OpenParams params{"weights", Access::kRead};
  params.location = kDev1;
  params.lease = false;
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto started = broker_->OpenOrWatch(bob_, params, watch, [&] { woken = true; });
  ASSERT_TRUE(started.ok());
  EXPECT_FALSE(started->has_value());
  copier_.Finish();
  ASSERT_TRUE(woken);
  auto made = broker_->OpenOrWatch(bob_, params, watch, [&] { woken = true; });
  ASSERT_TRUE(made.ok() && made->has_value()) << made.status();
  EXPECT_EQ((*made)->lease, 0u);
  ASSERT_EQ((*made)->buffer.replicas.size(), 2u);
  EXPECT_EQ((*made)->buffer.replicas[1].report.location, kDev1);
  EXPECT_EQ((*made)->buffer.replicas[1].report.readers, 0u);
  EXPECT_EQ(broker_->Counts().leases, 1u);  // Alice's writer's only.
}

TEST_F(ReplicasTest, AWritersSyncMakesTheOtherCopiesStaleAndRefreshesThoseNobodyHolds) {
  auto created = broker_->Create(alice_, CreateParams{"frame", 5, kHost, 0644});
  ASSERT_TRUE(created.ok());
  Write(*created, "first");
  // A second writer, on device:0: a copy of what the home holds.
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto device = WriterAt(alice_, "frame", kDev0, watch, &woken);
  ASSERT_TRUE(device.ok() && device->has_value()) << device.status();
  EXPECT_EQ(Read(**device, 5), "first");
  ASSERT_TRUE(broker_->Release(alice_, created->lease).ok());  // The home is unheld.
  Write(**device, "later");
  auto synced = broker_->Sync(alice_, (*device)->lease);
  ASSERT_TRUE(synced.ok()) << synced.status();
  EXPECT_EQ(synced->generation, 2u);
  EXPECT_EQ(synced->sync_state, "device_dirty");  // The host's refresh runs.
  ASSERT_EQ(copier_.pending(), 1);
  copier_.Finish();
  auto info = broker_->Stat(alice_, "frame");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->sync_state, "synchronized");
  auto home = OpenAt(alice_, "frame", kHost, watch, &woken, Access::kReadWrite);
  ASSERT_TRUE(home.ok() && home->has_value()) << home.status();
  EXPECT_EQ(Read(**home, 5), "later");
}

TEST_F(ReplicasTest, ASealThroughACopyIsDurableOnlyOnceTheHomeHasCaughtUp) {
  auto created = broker_->Create(alice_, CreateParams{"frame", 5, kHost, 0644});
  ASSERT_TRUE(created.ok());
  const BufferId home_id = created->buffer.id;
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto device = WriterAt(alice_, "frame", kDev0, watch, &woken);
  ASSERT_TRUE(device.ok() && device->has_value());
  ASSERT_TRUE(broker_->Release(alice_, created->lease).ok());
  Write(**device, "final");
  auto sealed = broker_->Seal(alice_, (*device)->lease);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->state, BufferState::kSealed);
  EXPECT_EQ(sealed->location, kDev0);  // The sealer's lease still maps device:0.
  // The state must not offer the home's old bytes as sealed after a crash.
  ASSERT_TRUE(journal_.Of(home_id).has_value());
  EXPECT_EQ(journal_.Of(home_id)->state, BufferState::kCreating);
  copier_.Finish();
  EXPECT_EQ(journal_.Of(home_id)->state, BufferState::kSealed);
  // And copies are journaled as unlinked buffers: a restart keeps them only
  // for holders.
  auto copy_state = journal_.Of((*device)->buffer.id);
  ASSERT_TRUE(copy_state.has_value());
  EXPECT_TRUE(copy_state->unlinked);
}

TEST_F(ReplicasTest, AStaleCopyThatIsHeldIsNeverRefreshedUnderItsReader) {
  auto created = broker_->Create(alice_, CreateParams{"frame", 5, kHost, 0644});
  ASSERT_TRUE(created.ok());
  Write(*created, "one..");
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto device = WriterAt(alice_, "frame", kDev0, watch, &woken);
  ASSERT_TRUE(device.ok() && device->has_value());
  // The home's writer publishes: device:0 is stale, but its writer holds it.
  Write(*created, "two..");
  ASSERT_TRUE(broker_->Sync(alice_, created->lease).ok());
  EXPECT_EQ(copier_.pending(), 0);
  EXPECT_EQ(Read(**device, 5), "one..");
  auto info = broker_->Stat(alice_, "frame");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->replicas[1].report.state, ReplicaState::kStale);
  EXPECT_EQ(info->sync_state, "host_dirty");
}

TEST_F(ReplicasTest, EndingTheSessionOfAWaitingStarterLetsAnotherOpenerFillAgain) {
  Publish("weights", "bytes");
  SessionId carol = Start(1002);
  bool carol_woken = false;
  bool bob_woken = false;
  const WatchId bob_watch = broker_->NewWatchId();
  ASSERT_TRUE(OpenAt(carol, "weights", kDev0, broker_->NewWatchId(), &carol_woken).ok());
  ASSERT_TRUE(OpenAt(bob_, "weights", kDev0, bob_watch, &bob_woken).ok());
  broker_->EndSession(carol);
  // The engine cancels the session's transfers: the fill ends cancelled.
  copier_.Finish(absl::CancelledError("session ended"));
  ASSERT_TRUE(bob_woken);
  auto again = OpenAt(bob_, "weights", kDev0, bob_watch, &bob_woken);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->has_value());
  EXPECT_EQ(copier_.started(), 2);
  copier_.Finish();
  auto served = OpenAt(bob_, "weights", kDev0, bob_watch, &bob_woken);
  ASSERT_TRUE(served.ok() && served->has_value());
  EXPECT_EQ(Read(**served, 5), "bytes");
}

}  // namespace
}  // namespace memd::broker

namespace memd::broker {
namespace {

TEST_F(ReplicasTest, UsageCountsOpensCopiesAndCopiesAvoided) {
  Publish("weights", std::string(4096, 'w'));
  OpenThere(alice_, "weights", kDev0);  // Made the copy: nothing avoided.
  OpenThere(bob_, "weights", kDev0);    // Served by it: one copy avoided.
  OpenThere(bob_, "weights", kHost);    // At home.
  auto info = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(info.ok());
  const BufferUsage& usage = info->usage;
  EXPECT_EQ(usage.opens_by_location.at("device:0"), 2u);
  EXPECT_EQ(usage.opens_by_location.at("host"), 1u);
  EXPECT_EQ(usage.opens_by_uid.at(kBob), 2u);
  EXPECT_EQ(usage.lazy_copies, 1u);
  EXPECT_EQ(usage.copies_avoided, 1u);
  EXPECT_EQ(usage.bytes_copied.at("host_to_device"), 4096u);
  EXPECT_TRUE(usage.last_used.has_value());
}

TEST_F(ReplicasTest, AdviceComesFromWhatTheBrokerCountedAndOnlyToTheOwner) {
  Publish("weights/llama", std::string(4096, 'w'));
  for (int i = 0; i < 16; ++i) OpenThere(bob_, "weights/llama", kDev1);
  auto advice = broker_->Advise(alice_, "weights/");
  ASSERT_TRUE(advice.ok()) << advice.status();
  ASSERT_EQ(advice->size(), 1u);
  EXPECT_EQ((*advice)[0].action, "move");
  EXPECT_EQ((*advice)[0].locations, std::vector<std::string>{"device:1"});
  EXPECT_THAT((*advice)[0].evidence, HasSubstr("16"));
  // Bob opened it, but what others do with Alice's buffer is hers to hear.
  auto bobs = broker_->Advise(bob_, "weights/");
  ASSERT_TRUE(bobs.ok());
  EXPECT_TRUE(bobs->empty());
  EXPECT_EQ(broker_->Advise(alice_, "bad prefix!").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memd::broker
