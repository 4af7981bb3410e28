// The broker's per-uid limits and byte quotas (BrokerTest).

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/broker_fixture.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::HasSubstr;

// ---- Per-uid limits ----

TEST_F(BrokerTest, SessionsPerUidAreLimitedWithTheNumbersAndTheKey) {
  BrokerLimits limits;
  limits.max_sessions_per_uid = 2;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  Start(Peer(kAlice, kStaff));
  auto third = broker_->StartSession(Peer(kAlice, kStaff), "c");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "uid 1000 holds 2 sessions; the limit is 2 (max_sessions_per_uid)");
  EXPECT_TRUE(broker_->StartSession(Peer(kBob, kStaff), "b").ok()) << "bob has his own";
  broker_->EndSession(first);
  EXPECT_TRUE(broker_->StartSession(Peer(kAlice, kStaff), "c").ok());
  EXPECT_EQ(broker_->Counts().rejections.sessions_per_uid, 1u);
}

TEST_F(BrokerTest, RootIsNotExemptFromPerUidLimits) {
  BrokerLimits limits;
  limits.max_sessions_per_uid = 1;
  MakeBroker(limits);
  Start(Peer(0, 0));
  EXPECT_EQ(broker_->StartSession(Peer(0, 0), "again").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BrokerTest, BuffersPerUidCountOwnedBuffersUntilTheirMemoryIsFreed) {
  BrokerLimits limits;
  limits.max_buffers_per_uid = 2;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  auto a = broker_->Create(alice, Params("a", 10));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(broker_->Create(alice, Params("b", 10)).ok());
  auto third = broker_->Create(alice, Params("c", 10));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "uid 1000 owns 2 buffers; the limit is 2 (max_buffers_per_uid)");
  auto either = broker_->OpenOrCreate(alice, Params("d", 10), broker_->NewWatchId(), {});
  EXPECT_EQ(either.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(broker_->Create(bob, Params("e", 10)).ok()) << "bob has his own";
  // Unlinked but leased, a buffer still holds its memory and counts.
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  EXPECT_FALSE(broker_->Create(alice, Params("c", 10)).ok());
  ASSERT_TRUE(broker_->Release(alice, a->lease).ok());
  EXPECT_TRUE(broker_->Create(alice, Params("c", 10)).ok());
  EXPECT_EQ(broker_->Counts().rejections.buffers_per_uid, 3u);
}

TEST_F(BrokerTest, LeasesPerUidAreLimitedAcrossItsSessions) {
  BrokerLimits limits;
  limits.max_leases_per_uid = 3;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(first, "a", "x", 0644);  // The writer's lease is the first.
  auto opened = broker_->Open(first, {"a", Access::kRead});
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(broker_->Open(second, {"a", Access::kRead}).ok());
  auto fourth = broker_->Open(second, {"a", Access::kRead});
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(fourth.status().message(),
            "uid 1000 holds 3 leases; the limit is 3 (max_leases_per_uid)");
  EXPECT_TRUE(broker_->Open(bob, {"a", Access::kRead}).ok()) << "bob has his own";
  ASSERT_TRUE(broker_->Release(first, opened->lease).ok());
  EXPECT_TRUE(broker_->Open(second, {"a", Access::kRead}).ok());
  broker_->EndSession(second);  // Its two leases go with it.
  EXPECT_TRUE(broker_->Open(first, {"a", Access::kRead}).ok());
  EXPECT_TRUE(broker_->Open(first, {"a", Access::kRead}).ok());
  EXPECT_EQ(broker_->Counts().rejections.leases_per_uid, 1u);
}

TEST_F(BrokerTest, WaitsArePerUidAndDaemonWideLimited) {
  BrokerLimits limits;
  limits.max_waits_per_uid = 2;
  limits.max_waits = 3;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  SessionId carol = Start(Peer(1003, kStaff));
  auto wait = [&](SessionId session, const char* name, WatchId watch = 0) {
    return broker_->OpenOrWatch(session, {name, Access::kRead},
                                watch != 0 ? watch : broker_->NewWatchId(), [] {});
  };
  const WatchId cancelled = broker_->NewWatchId();
  ASSERT_TRUE(wait(first, "x", cancelled).ok());
  ASSERT_TRUE(wait(second, "y").ok());
  auto over_uid = wait(first, "z");
  EXPECT_EQ(over_uid.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over_uid.status().message(),
            "uid 1000 has 2 calls waiting (Open, Create, WaitTransfer); the limit is 2 "
            "(max_waits_per_uid)");
  ASSERT_TRUE(wait(bob, "x").ok());
  auto over_all = wait(carol, "x");
  EXPECT_EQ(over_all.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over_all.status().message(),
            "3 calls are waiting (Open, Create, WaitTransfer); the limit is 3 (max_waits)");
  // A cancelled, a woken and an ended wait each give their room back.
  EXPECT_TRUE(broker_->CancelWatch(cancelled));
  EXPECT_TRUE(wait(carol, "x").ok());
  Publish(bob, "y", "1", 0644);  // Wakes second's.
  EXPECT_TRUE(wait(first, "z").ok());
  broker_->EndSession(bob);
  EXPECT_TRUE(wait(second, "w").ok()) << "alice: first's z and second's w";
  const LimitRejections rejections = broker_->Counts().rejections;
  EXPECT_EQ(rejections.waits_per_uid, 1u);
  EXPECT_EQ(rejections.waits, 1u);
}

// ---- Byte quotas ----

BrokerLimits Quotas(const char* uid, const char* session) {
  BrokerLimits limits;
  limits.max_uid_bytes = *Quota::Parse(uid);
  limits.max_session_bytes = *Quota::Parse(session);
  return limits;
}

TEST_F(BrokerTest, AUidQuotaRefusesWithTheNumbersAndFreesWithTheMemory) {
  MakeBroker(Quotas("3MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto a = broker_->Create(alice, Params("a", 2 * kMiB));
  ASSERT_TRUE(a.ok()) << a.status();
  auto over = broker_->Create(alice, Params("b", 2 * kMiB));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("buffer 'b' (2 MiB (2097152 bytes) at host) would take uid 1000 "
                        "over its quota of 3 MiB (3145728 bytes) at host (max_uid_bytes): "
                        "its buffers there take 2 MiB (2097152 bytes)"));
  EXPECT_EQ(broker_->Stat(alice, "b").status().code(), absl::StatusCode::kNotFound);
  // Up to the quota exactly is fine.
  ASSERT_TRUE(broker_->Create(alice, Params("c", kMiB)).ok());
  EXPECT_FALSE(broker_->Create(alice, Params("d", 1)).ok());
  // Unlinked, a buffer counts while its memory lives: until its last lease.
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  EXPECT_FALSE(broker_->Create(alice, Params("e", 2 * kMiB)).ok());
  ASSERT_TRUE(broker_->Release(alice, a->lease).ok());
  EXPECT_TRUE(broker_->Create(alice, Params("e", 2 * kMiB)).ok());
  const LimitRejections rejections = broker_->Counts().rejections;
  EXPECT_EQ(rejections.quotas.at({"max_uid_bytes", "host"}), 3u);
}

TEST_F(BrokerTest, AUidQuotaCountsEveryOwnedBufferAndOnlyThoseOfItsUid) {
  MakeBroker(Quotas("3MiB", ""));
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(first, "a", std::string(2 * kMiB, 'a'));
  // Another session of the same uid shares the quota...
  EXPECT_EQ(broker_->Create(second, Params("b", 2 * kMiB)).status().code(),
            absl::StatusCode::kResourceExhausted);
  // ...another uid has its own.
  EXPECT_TRUE(broker_->Create(bob, Params("c", 3 * kMiB)).ok());
  // A persistent buffer outlives its session and still counts for its uid.
  broker_->EndSession(first);
  EXPECT_EQ(broker_->Create(second, Params("d", 2 * kMiB)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BrokerTest, ASessionQuotaHoldsPerSessionWhileItLasts) {
  MakeBroker(Quotas("", "2MiB"));
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(first, Params("a", 2 * kMiB)).ok());
  auto over = broker_->Create(first, Params("b", 1));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("would take session "));
  EXPECT_THAT(over.status().message(), HasSubstr("(pid 5000) over its quota of 2 MiB"));
  EXPECT_THAT(over.status().message(), HasSubstr("(max_session_bytes)"));
  EXPECT_TRUE(broker_->Create(second, Params("c", 2 * kMiB)).ok());
  EXPECT_EQ(broker_->Counts().rejections.quotas.at({"max_session_bytes", "host"}), 1u);
}

TEST_F(BrokerTest, QuotasArePerLocation) {
  MakeBroker(Quotas("host=1MiB,device=4MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("h", kMiB)).ok());
  CreateParams on_device = Params("d", 4 * kMiB);
  on_device.location = Location::Device(0);
  EXPECT_TRUE(broker_->Create(alice, on_device).ok()) << "host's use does not count";
  on_device.name = "d2";
  auto over = broker_->Create(alice, on_device);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("at device:0 (max_uid_bytes)"));
}

TEST_F(BrokerTest, OpenOrCreateIsRefusedOnlyWhenItWouldCreate) {
  MakeBroker(Quotas("1MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "shared", std::string(kMiB, 's'), 0644);
  auto refused = broker_->OpenOrCreate(alice, Params("mine", 1), broker_->NewWatchId(), {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  // Opening what exists takes nothing of a quota.
  auto opened = broker_->OpenOrCreate(bob, Params("shared", kMiB), broker_->NewWatchId(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->has_value());
  EXPECT_FALSE((*opened)->created);
}

TEST_F(BrokerTest, QuotasChargeWhatThePoolSetsAsideNotTheSizeAsked) {
  MakeBroker(Quotas("1MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  // One byte takes a page: 256 of them fill 1 MiB.
  for (int i = 0; i < 256; ++i) {
    ASSERT_TRUE(broker_->Create(alice, Params(absl::StrCat("tiny/", i), 1)).ok()) << i;
  }
  auto over = broker_->Create(alice, Params("tiny/256", 1));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("buffer 'tiny/256' (1 B (1 bytes) at host, taking 4 KiB "
                        "(4096 bytes)) would take uid 1000 over its quota of 1 MiB "
                        "(1048576 bytes) at host (max_uid_bytes): its buffers there "
                        "take 1 MiB (1048576 bytes)"));
  auto usage = broker_->Usage(alice);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ((*usage)[0].bytes, kMiB);
  EXPECT_EQ((*usage)[0].bytes, pools_->Stats()[0].used_bytes);
  EXPECT_EQ(broker_->Sessions(alice)->at(0).created_bytes, kMiB);
}

TEST_F(BrokerTest, DeviceBuffersAreChargedWholeGranules) {
  backend_.set_device_alignment(2 * kMiB);
  MakeBroker(Quotas("device=8MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  CreateParams tiny = Params("g/0", 1);
  tiny.location = Location::Device(0);
  for (int i = 0; i < 4; ++i) {
    tiny.name = absl::StrCat("g/", i);
    ASSERT_TRUE(broker_->Create(alice, tiny).ok()) << i;
  }
  tiny.name = "g/4";
  auto over = broker_->Create(alice, tiny);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("taking 2 MiB (2097152 bytes)"));
  EXPECT_THAT(over.status().message(), HasSubstr("take 8 MiB (8388608 bytes)"));
  // Refused before allocating: the pool holds the four granules only.
  EXPECT_EQ(pools_->Stats()[1].used_bytes, 8 * kMiB);
}

TEST_F(BrokerTest, UsageShowsEachUidItsOwnAndRootEveryone) {
  MakeBroker(Quotas("host=8MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "a1", std::string(kMiB, '1'));
  Publish(alice, "a2", std::string(2 * kMiB, '2'));
  CreateParams on_device = Params("ad", 3 * kMiB);
  on_device.location = Location::Device(0);
  ASSERT_TRUE(broker_->Create(alice, on_device).ok());
  Publish(bob, "b", std::string(kMiB, 'b'));

  auto mine = broker_->Usage(alice);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u) << "alice sees only her own, per location";
  EXPECT_EQ((*mine)[0].location, Location::Host());
  EXPECT_EQ((*mine)[0].bytes, 3 * kMiB);
  EXPECT_EQ((*mine)[0].buffers, 2u);
  EXPECT_EQ((*mine)[0].quota_bytes, 8 * kMiB);
  EXPECT_EQ((*mine)[1].location, Location::Device(0));
  EXPECT_EQ((*mine)[1].bytes, 3 * kMiB);
  EXPECT_EQ((*mine)[1].quota_bytes, 0u) << "no quota there";

  auto everyone = broker_->Usage(root);
  ASSERT_TRUE(everyone.ok());
  ASSERT_EQ(everyone->size(), 3u);
  EXPECT_EQ((*everyone)[2].uid, kBob);
  EXPECT_EQ(broker_->Usage(0)->size(), 3u) << "session 0: metrics see all";
  // Sessions say what each created, all locations together.
  auto listed = broker_->Sessions(root);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  std::map<uid_t, std::uint64_t> created;
  for (const SessionInfo& session : *listed) created[session.uid] = session.created_bytes;
  EXPECT_EQ(created[kAlice], 6 * kMiB);  // 3 host + 3 device
  EXPECT_EQ(created[kBob], kMiB);
  EXPECT_EQ(created[0], 0u);

  // Unlinked, and its writer's lease gone with the session: freed, and off
  // the list.
  ASSERT_TRUE(broker_->Unlink(bob, "b").ok());
  EXPECT_EQ(broker_->Usage(root)->size(), 3u) << "still leased";
  broker_->EndSession(bob);
  EXPECT_EQ(broker_->Usage(root)->size(), 2u);
  EXPECT_EQ(broker_->Usage(bob).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(BrokerTest, ASnapshotsCountsAndUsageAgreeOnEveryBuffer) {
  MakeBroker(Quotas("", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "a1", std::string(kMiB, '1'));
  Publish(alice, "a2", std::string(2 * kMiB, '2'));
  Publish(bob, "b", std::string(kMiB, 'b'));
  ASSERT_TRUE(broker_->Unlink(bob, "b").ok());

  const BrokerSnapshot snapshot = broker_->Snapshot();
  EXPECT_EQ(snapshot.counts.buffers, 3u);
  EXPECT_EQ(snapshot.counts.sessions, 2u);
  std::uint64_t buffers = 0;
  for (const UidUsage& usage : snapshot.usage) buffers += usage.buffers;
  EXPECT_EQ(buffers, snapshot.counts.buffers)
      << "every buffer counted is in some uid's usage, and no other";
  ASSERT_EQ(snapshot.usage.size(), 2u) << "every uid, as root would see it";
  EXPECT_EQ(snapshot.usage[0].uid, kAlice);
  EXPECT_EQ(snapshot.usage[1].uid, kBob);
}

TEST_F(BrokerTest, NewQuotasApplyToTheNextRequest) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("a", 2 * kMiB)).ok());
  broker_->SetLimits(Quotas("1MiB", ""));
  // What exists stays; nothing more fits.
  EXPECT_TRUE(broker_->Stat(alice, "a").ok());
  EXPECT_EQ(broker_->Create(alice, Params("b", 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  broker_->SetLimits(BrokerLimits{});
  EXPECT_TRUE(broker_->Create(alice, Params("b", 1)).ok());
}

}  // namespace
}  // namespace memd::broker
