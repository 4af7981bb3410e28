// Who may do what with a buffer, and what listings tell whom (BrokerTest).

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/broker_fixture.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::ElementsAre;

// ---- Permissions ----

// The refusal says what was refused, and nothing of the buffer: neither its
// owner, group, mode nor size goes to a uid that may not read it.
TEST_F(BrokerTest, OwnerOnlyBufferIsRefusedToOtherUsersWithoutItsDetails) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "private", "secret");
  auto grant = broker_->Open(bob, {"private", Access::kRead});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(grant.status().message(), "uid 1001 may not read buffer 'private'");
  auto stat = broker_->Stat(bob, "private");
  EXPECT_EQ(stat.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(stat.status().message(), "uid 1001 may not inspect buffer 'private'");
  EXPECT_TRUE(broker_->List(bob, "")->empty());
  absl::Status unlink = broker_->Unlink(bob, "private");
  EXPECT_EQ(unlink.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(unlink.message(),
            "uid 1001 may not unlink buffer 'private': only its owner and root may");
}

// A caller who may read the buffer may Stat it anyway: a refusal to write
// or unlink tells it owner, group and mode, to say why.
TEST_F(BrokerTest, AReaderIsToldWhoOwnsTheBufferItMayNotWrite) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  auto created =
      broker_->Create(alice, CreateParams{"shared", 64, Location::Host(), 0644});
  ASSERT_TRUE(created.ok()) << created.status();
  auto grant = broker_->Open(bob, {"shared", Access::kReadWrite});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(grant.status().message(),
            "uid 1001 may not write buffer 'shared' (owner uid 1000, gid 50, mode 0644)");
}

TEST_F(BrokerTest, GroupModeAdmitsMembersOfTheOwnersGroupOnly) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob_staff = Start(Peer(kBob, kOther, {kOther, kStaff}));
  SessionId bob_other = Start(Peer(kBob, kOther, {kOther}));
  Publish(alice, "team", "shared", 0640);
  EXPECT_TRUE(broker_->Open(bob_staff, {"team", Access::kRead}).ok());
  EXPECT_EQ(broker_->Open(bob_other, {"team", Access::kRead}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Group members may read but not unlink: only the owner and root may.
  EXPECT_EQ(broker_->Unlink(bob_staff, "team").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(BrokerTest, WriteNeedsTheWriteBit) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("ro-for-group", kMiB, 0640)).ok());
  ASSERT_TRUE(broker_->Create(alice, Params("rw-for-group", kMiB, 0660)).ok());
  EXPECT_EQ(broker_->Open(bob, {"ro-for-group", Access::kReadWrite}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(broker_->Open(bob, {"rw-for-group", Access::kReadWrite}).ok());
}

TEST_F(BrokerTest, RootMayReadAndUnlinkAnything) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "private", "secret");
  EXPECT_TRUE(broker_->Open(root, {"private", Access::kRead}).ok());
  EXPECT_THAT(*broker_->List(root, ""), ::testing::SizeIs(1));
  EXPECT_TRUE(broker_->Unlink(root, "private").ok());
}

TEST_F(BrokerTest, MemoryIsReusedOnlyByBuffersOfTheSameOwnerGroupAndMode) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto release_and_unlink = [&](Grant grant, const std::string& name) {
    ASSERT_TRUE(broker_->Release(alice, grant.lease).ok());
    ASSERT_TRUE(broker_->Unlink(alice, name).ok());
  };
  release_and_unlink(Publish(alice, "private", "x", 0600), "private");
  // Another mode is another set of readers: it must not get that memory.
  Publish(alice, "public", "y", 0644);
  EXPECT_EQ(pools_->Stats()[0].hit_count, 0u);
  Publish(alice, "private2", "z", 0600);
  EXPECT_EQ(pools_->Stats()[0].hit_count, 1u);
}

// ---- List, Stat, Sessions ----

TEST_F(BrokerTest, ListFiltersByPrefixAndSortsByName) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  for (const char* name : {"job/b", "job/a", "other", "job2"}) {
    Publish(alice, name, "x");
  }
  auto listed = broker_->List(alice, "job/");
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> names;
  for (const auto& info : *listed) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("job/a", "job/b"));
  EXPECT_EQ(broker_->List(alice, "")->size(), 4u);
  EXPECT_EQ(broker_->List(alice, "bad prefix").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->List(alice, std::string(256, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An unlinked buffer still leased takes memory: an operator's List may
// show it (issue 29), marked unlinked, after the buffer that took its name
// since, to whoever could read it while it was named, and to nobody else.
TEST_F(BrokerTest, ListShowsUnlinkedLeasedBuffersOnlyWhenAskedAndOnlyToReaders) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Grant held = Publish(alice, "job/a", "old");
  ASSERT_TRUE(broker_->Unlink(alice, "job/a").ok());
  Publish(alice, "job/a", "new");
  Publish(alice, "other", "x");

  EXPECT_EQ(broker_->List(alice, "job/")->size(), 1u) << "not unless asked";
  auto listed = broker_->List(alice, "job/", /*include_unlinked=*/true);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_FALSE((*listed)[0].unlinked);
  EXPECT_TRUE((*listed)[1].unlinked);
  EXPECT_EQ((*listed)[1].id, held.buffer.id);
  EXPECT_EQ((*listed)[1].lease_count, 1u);
  EXPECT_EQ(broker_->List(root, "", true)->size(), 3u);
  // Bob could not read it while it was named (0600): nor now.
  EXPECT_TRUE(broker_->List(bob, "", true)->empty());

  ASSERT_TRUE(broker_->Release(alice, held.lease).ok());
  EXPECT_EQ(broker_->List(alice, "job/", true)->size(), 1u) << "freed: nothing to show";
}

// Who holds a buffer's leases (issue 29): a uid sees its own sessions' in
// full, and of other uids' leases only how many (lease_count says as much);
// root sees every holder.
TEST_F(BrokerTest, StatShowsOwnUidsHoldersAndOnlyCountsOthers) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId alice_reader = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "shared", "x", 0644);  // Sealed: Publish's lease stays.
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(broker_->Open(alice_reader, {"shared"}).ok());
  auto bobs_lease = broker_->Open(bob, {"shared"});
  ASSERT_TRUE(bobs_lease.ok()) << bobs_lease.status();

  auto seen = broker_->Stat(alice, "shared");
  ASSERT_TRUE(seen.ok()) << seen.status();
  ASSERT_EQ(seen->holders.listed.size(), 2u);
  const LeaseHolder& writer = seen->holders.listed[0];  // The oldest first.
  EXPECT_EQ(writer.session, alice);
  EXPECT_EQ(writer.pid, 4000 + static_cast<pid_t>(kAlice));
  EXPECT_EQ(writer.uid, kAlice);
  EXPECT_EQ(writer.command, "test");
  EXPECT_EQ(writer.access, Access::kReadWrite);
  EXPECT_EQ(writer.leases, 1u);
  EXPECT_EQ(writer.location, Location::Host());
  const LeaseHolder& reader = seen->holders.listed[1];
  EXPECT_EQ(reader.session, alice_reader);
  EXPECT_EQ(reader.access, Access::kRead);
  EXPECT_EQ(reader.leases, 2u) << "one line per session, location and access";
  EXPECT_EQ(seen->holders.other_users_leases, 1u);
  EXPECT_EQ(seen->holders.unlisted_leases, 0u);

  auto bobs = broker_->Stat(bob, "shared");
  ASSERT_TRUE(bobs.ok()) << bobs.status();
  ASSERT_EQ(bobs->holders.listed.size(), 1u);
  EXPECT_EQ(bobs->holders.listed[0].session, bob);
  EXPECT_EQ(bobs->holders.other_users_leases, 3u);

  auto roots = broker_->Stat(root, "shared");
  ASSERT_TRUE(roots.ok()) << roots.status();
  EXPECT_EQ(roots->holders.listed.size(), 3u);
  EXPECT_EQ(roots->holders.other_users_leases, 0u);
  // Holders are Stat's: a listing carries none.
  EXPECT_TRUE(broker_->List(root, "shared")->at(0).holders.listed.empty());
  // A lease released holds nothing any more.
  ASSERT_TRUE(broker_->Release(bob, bobs_lease->lease).ok());
  EXPECT_EQ(broker_->Stat(root, "shared")->holders.listed.size(), 2u);
}

TEST_F(BrokerTest, StatListsAtMostTheCapOfHoldersAndCountsTheRest) {
  Publish(Start(Peer(kAlice, kStaff)), "popular", "x", 0644);
  SessionId root = Start(Peer(0, 0));
  const std::size_t extra = 6;
  for (std::size_t i = 0; i < kMaxListedHolders + extra; ++i) {
    ASSERT_TRUE(broker_->Open(Start(Peer(kBob, kOther)), {"popular"}).ok());
  }
  auto seen = broker_->Stat(root, "popular");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->holders.listed.size(), kMaxListedHolders);
  // The holders past the cap, one lease each.
  EXPECT_EQ(seen->holders.unlisted_leases, 1 + extra);
  EXPECT_EQ(seen->lease_count, kMaxListedHolders + extra + 1);
}

TEST_F(BrokerTest, SessionsShowsOwnUidToUsersAndEverythingToRoot) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Start(Peer(kBob, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "a", "x");
  auto mine = broker_->Sessions(alice);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, alice);
  EXPECT_EQ((*mine)[0].uid, kAlice);
  EXPECT_EQ((*mine)[0].lease_count, 1u);
  EXPECT_EQ((*mine)[0].command, "test");
  EXPECT_EQ(broker_->Sessions(root)->size(), 3u);
}

TEST_F(BrokerTest, CallsOfAnUnknownSessionAreUnauthenticated) {
  EXPECT_EQ(broker_->Create(42, Params("a")).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(broker_->Release(42, 1).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(broker_->List(42, "").status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace memd::broker
