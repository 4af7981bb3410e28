// The broker's side of durability: what it tells its journal, and buffers
// taken back from a previous memd with the grace period in which their
// holders may come back (daemon/broker/broker_adopt.cc).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/broker/broker.h"
#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;

constexpr gid_t kGroup = 50;  // Every client's and adopted buffer's group.
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;

CreateParams Params(std::string name, Persistence persistence = Persistence::kPersistent) {
  return CreateParams{std::move(name), kMiB, Location::Host(), kDefaultMode, persistence};
}

// Writes down what the broker reports, as "changed NAME state" lines.
class RecordingJournal : public BufferJournal {
 public:
  void BufferChanged(const BufferInfo& info, const pool::Allocation& allocation) override {
    events.push_back(std::string("changed ") + info.name +
                     (info.state == BufferState::kSealed ? " sealed" : " creating") +
                     (info.unlinked ? " unlinked" : "") +
                     (allocation.bytes >= info.size ? "" : " SHORT"));
  }
  void BufferFreed(BufferId id) override { events.push_back("freed " + names[id]); }
  void SessionStarted(SessionId id, uid_t uid, const std::string& digest) override {
    holds.push_back(absl::StrCat("session ", id, " uid ", uid, " digest ", digest));
  }
  void SessionEnded(SessionId id) override { holds.push_back(absl::StrCat("session end ", id)); }
  void LeaseGranted(LeaseId, SessionId session, BufferId buffer, Access access) override {
    holds.push_back(absl::StrCat("lease of ", session, " on ", buffer,
                                 access == Access::kReadWrite ? " rw" : " r"));
  }
  void LeaseEnded(LeaseId) override { holds.push_back("lease end"); }

  std::map<BufferId, std::string> names;
  std::vector<std::string> events;
  // Sessions and leases, apart from the buffers' events.
  std::vector<std::string> holds;
};

// SHA-256 digests stand-ins: 32 bytes, one per token.
std::string Digest(char token) { return std::string(32, token); }

class AdoptTest : public ::testing::Test {
 protected:
  AdoptTest() {
    pool::CarvingPoolOptions options;
    options.idle_budget = -1;
    pools_.Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(), options, clock_));
    broker_ = std::make_unique<Broker>(pools_, BrokerLimits{}, clock_);
  }

  pool::Pool& host() { return *pools_.Find(Location::Host()); }

  // A buffer as a previous memd left it, in an allocation of this pool.
  Broker::AdoptedBuffer Left(BufferId id, std::string name, BufferState state,
                             Persistence persistence = Persistence::kPersistent,
                             bool unlinked = false) {
    Broker::AdoptedBuffer adopted;
    auto allocation = host().Allocate(kMiB, pool::Domain{kAlice, kGroup, kDefaultMode});
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    adopted.allocation = std::move(*allocation);
    BufferInfo& info = adopted.info;
    info.id = id;
    info.name = std::move(name);
    info.size = kMiB;
    info.location = Location::Host();
    info.owner_uid = kAlice;
    info.owner_gid = kGroup;
    info.state = state;
    if (state == BufferState::kSealed) info.sealed = clock_.Now();
    info.persistence = persistence;
    info.unlinked = unlinked;
    info.lease_count = 3;  // Leases of the dead memd: not this one's.
    return adopted;
  }

  // Adopts one buffer `id` ("wip", being written; or sealed) and lease
  // `lease` on it that Alice's dead session 500 held with token 'a'.
  void AdoptHeld(BufferState state = BufferState::kCreating, LeaseId lease = 900,
                 BrokerLimits limits = {}) {
    broker_->SetLimits(limits);
    std::vector<Broker::AdoptedBuffer> left;
    left.push_back(Left(1, "wip", state));
    std::vector<Broker::AdoptedSession> sessions = {{500, kAlice, Digest('a')}};
    std::vector<Broker::AdoptedLease> leases = {{lease, 500, 1, Access::kReadWrite}};
    ASSERT_TRUE(broker_->Adopt(std::move(left), std::move(sessions), std::move(leases)).ok());
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  pool::PoolSet pools_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(AdoptTest, TheJournalHearsOfEveryBufferFromCreateToFreeInOrder) {
  RecordingJournal journal;
  broker_->SetJournal(&journal);
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test");
  auto kept = broker_->Create(alice, Params("kept"));
  auto dropped = broker_->Create(alice, Params("dropped", Persistence::kEphemeral));
  ASSERT_TRUE(kept.ok() && dropped.ok());
  journal.names[kept->buffer.id] = "kept";
  journal.names[dropped->buffer.id] = "dropped";
  ASSERT_TRUE(broker_->Seal(alice, kept->lease).ok());
  ASSERT_TRUE(broker_->Release(alice, dropped->lease).ok());
  ASSERT_TRUE(broker_->Unlink(alice, "kept").ok());  // Still leased: kept.
  ASSERT_TRUE(broker_->Release(alice, kept->lease).ok());
  EXPECT_THAT(journal.events,
              ElementsAre("changed kept creating", "changed dropped creating",
                          "changed kept sealed", "changed dropped creating unlinked",
                          "freed dropped", "changed kept sealed unlinked", "freed kept"));
}

TEST_F(AdoptTest, AdoptedBuffersKeepTheirIdsNamesOwnersAndCharges) {
  std::vector<Broker::AdoptedBuffer> left;
  left.push_back(Left(77, "weights", BufferState::kSealed));
  const std::uint64_t bytes = left[0].allocation.bytes;
  ASSERT_TRUE(broker_->Adopt(std::move(left)).ok());
  SessionId bob = *broker_->StartSession(Peer(kBob, kGroup), "test");
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test");
  auto info = broker_->Stat(alice, "weights");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->id, 77u);
  EXPECT_EQ(info->owner_uid, kAlice);
  EXPECT_EQ(info->state, BufferState::kSealed);
  EXPECT_EQ(info->lease_count, 0u);
  // Mode 0600 still keeps Bob out; Alice opens it.
  EXPECT_EQ(broker_->Open(bob, {"weights"}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(broker_->Open(alice, {"weights"}).ok());
  auto usage = broker_->Usage(0);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].uid, kAlice);
  EXPECT_EQ((*usage)[0].bytes, bytes);
  EXPECT_EQ(broker_->Counts().buffers, 1u);
  EXPECT_EQ(broker_->CountsOf(kAlice).buffers, 1u);
  // A new buffer never takes an adopted id.
  auto created = broker_->Create(alice, Params("more"));
  ASSERT_TRUE(created.ok());
  EXPECT_NE(created->buffer.id, 77u);
  EXPECT_EQ(broker_->EndGrace(), 0u);  // Nothing waited.
}

TEST_F(AdoptTest, BuffersThatWaitForHoldersGoWhenTheGraceEndsUnlessReclaimed) {
  std::vector<Broker::AdoptedBuffer> left;
  left.push_back(Left(1, "sealed", BufferState::kSealed));
  left.push_back(Left(2, "half-written", BufferState::kCreating));
  left.push_back(Left(3, "scratch", BufferState::kSealed, Persistence::kEphemeral));
  left.push_back(Left(4, "gone", BufferState::kSealed, Persistence::kPersistent, true));
  left.push_back(Left(5, "reclaimed", BufferState::kSealed, Persistence::kEphemeral));
  ASSERT_TRUE(broker_->Adopt(std::move(left)).ok());
  EXPECT_EQ(broker_->Counts().buffers, 5u);
  EXPECT_EQ(host().Stats().used_bytes, 5 * kMiB);
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test");
  auto reclaimed = broker_->Open(alice, {"reclaimed"});
  ASSERT_TRUE(reclaimed.ok()) << reclaimed.status();
  // An ephemeral buffer's name goes with its last lease, as ever; its
  // memory waits with the others for the grace period to end.
  auto scratch = broker_->Open(alice, {"scratch"});
  ASSERT_TRUE(scratch.ok());
  ASSERT_TRUE(broker_->Release(alice, scratch->lease).ok());
  EXPECT_EQ(broker_->Stat(alice, "scratch").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(host().Stats().used_bytes, 5 * kMiB);

  EXPECT_EQ(broker_->EndGrace(), 3u);
  EXPECT_EQ(broker_->EndGrace(), 0u);
  auto listed = broker_->List(alice, "");
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> names;
  for (const BufferInfo& info : *listed) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("reclaimed", "sealed"));
  EXPECT_EQ(broker_->Counts().buffers, 2u);
  EXPECT_EQ(host().Stats().used_bytes, 2 * kMiB);
  // The re-claimed one goes as an ephemeral buffer does: with its lease.
  ASSERT_TRUE(broker_->Release(alice, reclaimed->lease).ok());
  EXPECT_EQ(host().Stats().used_bytes, kMiB);
}

TEST_F(AdoptTest, AnAdoptionThatCannotBeWholeAdoptsNothingAndGivesTheMemoryBack) {
  std::vector<Broker::AdoptedBuffer> twice;
  twice.push_back(Left(1, "a", BufferState::kSealed));
  twice.push_back(Left(2, "a", BufferState::kSealed));
  absl::Status refused = broker_->Adopt(std::move(twice));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("'a'"));
  std::vector<Broker::AdoptedBuffer> same_id;
  same_id.push_back(Left(9, "b", BufferState::kSealed));
  same_id.push_back(Left(9, "c", BufferState::kSealed));
  EXPECT_EQ(broker_->Adopt(std::move(same_id)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->Counts().buffers, 0u);
  EXPECT_EQ(host().Stats().used_bytes, 0u);

  ASSERT_TRUE(broker_->StartSession(Peer(kAlice, kGroup), "test").ok());
  std::vector<Broker::AdoptedBuffer> late;
  late.push_back(Left(3, "d", BufferState::kSealed));
  EXPECT_EQ(broker_->Adopt(std::move(late)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(host().Stats().used_bytes, 0u);
}

TEST_F(AdoptTest, TheJournalHearsOfSessionsAndLeasesAndASessionEndsInOneRecord) {
  RecordingJournal journal;
  broker_->SetJournal(&journal);
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('a'));
  auto created = broker_->Create(alice, Params("x"));
  ASSERT_TRUE(created.ok());
  const BufferId x = created->buffer.id;
  ASSERT_TRUE(broker_->Seal(alice, created->lease).ok());
  auto opened = broker_->Open(alice, {"x"});
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(broker_->Release(alice, created->lease).ok());
  broker_->EndSession(alice);  // Ends the open's lease with it.
  EXPECT_THAT(journal.holds,
              ElementsAre(absl::StrCat("session ", alice, " uid ", kAlice, " digest ", Digest('a')),
                          absl::StrCat("lease of ", alice, " on ", x, " rw"),
                          absl::StrCat("lease of ", alice, " on ", x, " r"), "lease end",
                          absl::StrCat("session end ", alice)));
  // The buffer was journaled before its first lease.
  EXPECT_EQ(journal.events.front(), "changed x creating");
  EXPECT_THAT(journal.events, ::testing::Not(::testing::IsEmpty()));
}

TEST_F(AdoptTest, ALeaseIsReclaimedOnlyByItsUidWithItsTokenAndOnlyOnce) {
  AdoptHeld();
  SessionId bob = *broker_->StartSession(Peer(kBob, kGroup), "test", Digest('b'));
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('c'));
  auto code_of = [&](SessionId session, const std::string& digest) {
    auto outcomes = broker_->Reclaim(session, digest, {900});
    EXPECT_TRUE(outcomes.ok()) << outcomes.status();
    return outcomes.ok() && outcomes->size() == 1 ? (*outcomes)[0].status.code()
                                                   : absl::StatusCode::kUnknown;
  };
  // Bob, even with Alice's token, and Alice with another token: nothing,
  // and told no more than for an id never held.
  EXPECT_EQ(code_of(bob, Digest('a')), absl::StatusCode::kNotFound);
  EXPECT_EQ(code_of(alice, Digest('x')), absl::StatusCode::kNotFound);
  EXPECT_EQ(code_of(alice, ""), absl::StatusCode::kNotFound);
  auto never = broker_->Reclaim(alice, Digest('a'), {901});
  ASSERT_TRUE(never.ok());
  EXPECT_EQ((*never)[0].status.code(), absl::StatusCode::kNotFound);
  // Alice with the dead session's token: hers again, writable, same id.
  EXPECT_EQ(code_of(alice, Digest('a')), absl::StatusCode::kOk);
  EXPECT_EQ(code_of(alice, Digest('a')), absl::StatusCode::kNotFound);  // Once.
  EXPECT_EQ(broker_->Stat(alice, "wip")->lease_count, 1u);
  EXPECT_EQ(broker_->CountsOf(kAlice).leases, 1u);
  EXPECT_EQ(broker_->Seal(bob, 900).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(broker_->Seal(alice, 900).ok());
  // Held, it outlives the grace period; sealed, it outlives its lease.
  EXPECT_EQ(broker_->EndGrace(), 0u);
  ASSERT_TRUE(broker_->Release(alice, 900).ok());
  EXPECT_TRUE(broker_->Stat(alice, "wip").ok());
}

TEST_F(AdoptTest, AnUnclaimedLeaseEndsWithTheGraceAndItsUnsealedBufferGoes) {
  AdoptHeld();
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('c'));
  EXPECT_EQ(broker_->EndGrace(), 1u);
  EXPECT_EQ(broker_->Stat(alice, "wip").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(host().Stats().used_bytes, 0u);
  auto late = broker_->Reclaim(alice, Digest('a'), {900});
  ASSERT_TRUE(late.ok());
  EXPECT_EQ((*late)[0].status.code(), absl::StatusCode::kNotFound);
}

TEST_F(AdoptTest, ABufferSomeoneMayStillMapOutlivesAnUnlinkUntilTheGraceEnds) {
  AdoptHeld(BufferState::kSealed);
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('c'));
  ASSERT_TRUE(broker_->Unlink(alice, "wip").ok());
  // The dead session's client may still map it: its memory is not reused.
  EXPECT_EQ(host().Stats().used_bytes, kMiB);
  EXPECT_EQ(broker_->EndGrace(), 1u);
  EXPECT_EQ(host().Stats().used_bytes, 0u);
}

TEST_F(AdoptTest, AReclaimIsBoundedByTheSessionsAndTheUidsLeaseLimits) {
  BrokerLimits limits;
  limits.max_leases_per_session = 1;
  AdoptHeld(BufferState::kCreating, 900, limits);
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('c'));
  EXPECT_EQ(broker_->Reclaim(alice, Digest('a'), {900, 901}).status().code(),
            absl::StatusCode::kInvalidArgument);  // More than a session may hold.
  limits.max_leases_per_session = 1 << 20;
  broker_->SetLimits(limits);
  std::vector<LeaseId> flood(kMaxLeasesPerReclaim + 1);
  for (std::size_t i = 0; i < flood.size(); ++i) flood[i] = 100000 + i;  // Never held.
  EXPECT_EQ(broker_->Reclaim(alice, Digest('a'), flood).status().code(),
            absl::StatusCode::kInvalidArgument);  // More than one call names.
  flood.pop_back();
  auto most = broker_->Reclaim(alice, Digest('a'), flood);
  ASSERT_TRUE(most.ok()) << most.status();
  ASSERT_EQ(most->size(), kMaxLeasesPerReclaim);
  EXPECT_EQ(most->back().status.code(), absl::StatusCode::kNotFound);
  limits.max_leases_per_session = 4;
  broker_->SetLimits(limits);
  EXPECT_EQ(broker_->Reclaim(alice, Digest('a'), {900, 900}).status().code(),
            absl::StatusCode::kInvalidArgument);
  limits.max_leases_per_uid = 1;
  broker_->SetLimits(limits);
  ASSERT_TRUE(broker_->Create(alice, Params("other")).ok());  // Alice's one lease.
  auto refused = broker_->Reclaim(alice, Digest('a'), {900});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ((*refused)[0].status.code(), absl::StatusCode::kResourceExhausted);
  // Refused for a limit, it stays to be claimed.
  limits.max_leases_per_uid = 4;
  broker_->SetLimits(limits);
  auto claimed = broker_->Reclaim(alice, Digest('a'), {900});
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE((*claimed)[0].status.ok()) << (*claimed)[0].status;
  EXPECT_EQ(broker_->Reclaim(12345, Digest('a'), {900}).status().code(),
            absl::StatusCode::kUnauthenticated);
}

// The journal keeps no grant times: a re-claimed lease is as old as the
// adoption, which is when this memd first held it (the leak report's age).
TEST_F(AdoptTest, AReclaimedLeaseCountsItsAgeFromTheAdoption) {
  AdoptHeld();
  clock_.Advance(absl::Hours(2));
  SessionId alice = *broker_->StartSession(Peer(kAlice, kGroup), "test", Digest('c'));
  auto claimed = broker_->Reclaim(alice, Digest('a'), {900});
  ASSERT_TRUE(claimed.ok() && (*claimed)[0].status.ok());
  clock_.Advance(absl::Minutes(30));
  auto report = broker_->Leaks(alice, {.older_than = absl::Hours(2)});
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<Leak> leases;
  for (const Leak& leak : report->leaks) {
    if (leak.kind == "idle_lease") leases.push_back(leak);
  }
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].subject, "lease 900 on wip");
  EXPECT_EQ(leases[0].age, absl::Minutes(150));
}

TEST_F(AdoptTest, LeasesOfSessionsOrBuffersNotAdoptedAreRefusedWithEverythingElse) {
  struct Case {
    std::vector<Broker::AdoptedSession> sessions;
    std::vector<Broker::AdoptedLease> leases;
  };
  const std::vector<Case> cases = {
      {{{500, kAlice, Digest('a')}}, {{900, 501, 1, Access::kRead}}},   // Unknown session.
      {{{500, kAlice, Digest('a')}}, {{900, 500, 2, Access::kRead}}},   // Unknown buffer.
      {{{500, kAlice, Digest('a')}}, {{0, 500, 1, Access::kRead}}},     // Id 0.
      {{{500, kAlice, Digest('a')}},
       {{900, 500, 1, Access::kRead}, {900, 500, 1, Access::kRead}}},  // Twice.
      {{{0, kAlice, Digest('a')}}, {}},                                 // Session 0.
  };
  for (const Case& c : cases) {
    std::vector<Broker::AdoptedBuffer> left;
    left.push_back(Left(1, "wip", BufferState::kSealed));
    EXPECT_EQ(broker_->Adopt(std::move(left), c.sessions, c.leases).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(host().Stats().used_bytes, 0u);
    EXPECT_EQ(broker_->Counts().buffers, 0u);
  }
}

}  // namespace
}  // namespace memd::broker
