// Broker::Leaks and the snapshot's leak totals: a scripted history on the
// fake clock, judged as `memctl leaks` and the metrics see it.

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
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
constexpr pid_t kAlicePid = 4000 + kAlice;
constexpr pid_t kBobPid = 4000 + kBob;
constexpr std::uint64_t kPage = 4096;

auto Kind(const std::string& kind, const std::string& subject) {
  return AllOf(Field(&Leak::kind, kind), Field(&Leak::subject, subject));
}

class BrokerLeaksTest : public ::testing::Test {
 protected:
  BrokerLeaksTest() {
    pool::CarvingPoolOptions options;
    options.idle_budget = -1;
    pools_.Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(), options, clock_));
    broker_ = std::make_unique<Broker>(pools_, BrokerLimits{}, clock_);
    alice_ = *broker_->StartSession(Peer(kAlice), "trainer");
    bob_ = *broker_->StartSession(Peer(kBob), "reader");
    root_ = *broker_->StartSession(Peer(0), "memctl");
  }

  // Readable by everyone (0644), so that others' leases on it can be made.
  Grant Create(SessionId session, const std::string& name, bool seal) {
    auto grant = broker_->Create(session, {name, kPage, Location::Host(), 0644});
    EXPECT_TRUE(grant.ok()) << grant.status();
    if (seal) {
      EXPECT_TRUE(broker_->Seal(session, grant->lease).ok());
    }
    return std::move(*grant);
  }

  std::vector<Leak> LeaksOf(SessionId session, LeakRules rules = {}) {
    auto report = broker_->Leaks(session, rules);
    EXPECT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->omitted, 0u);
    return report.ok() ? report->leaks : std::vector<Leak>{};
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  pool::PoolSet pools_;
  std::unique_ptr<Broker> broker_;
  SessionId alice_ = 0, bob_ = 0, root_ = 0;
};

TEST_F(BrokerLeaksTest, ASealedBufferNobodyOpensIsALeakOnlyOnceOldEnoughAndUntilOpened) {
  Grant made = Create(alice_, "weights", /*seal=*/true);
  ASSERT_TRUE(broker_->Release(alice_, made.lease).ok());
  clock_.Advance(absl::Minutes(59));
  EXPECT_THAT(LeaksOf(alice_), IsEmpty());
  clock_.Advance(absl::Minutes(1));
  EXPECT_THAT(LeaksOf(alice_),
              ElementsAre(AllOf(Kind("never_opened", "weights"), Field(&Leak::uid, kAlice),
                                Field(&Leak::bytes, kPage), Field(&Leak::age, absl::Hours(1)),
                                Field(&Leak::pid, kAlicePid))));

  auto opened = broker_->Open(bob_, {"weights", Access::kRead});
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(broker_->Release(bob_, opened->lease).ok());
  EXPECT_THAT(LeaksOf(alice_), IsEmpty());
}

TEST_F(BrokerLeaksTest, AWriterThatNeverSealsShowsAsUnsealedIdleAndItsLeaseAsIdle) {
  Grant held = Create(alice_, "half", /*seal=*/false);
  clock_.Advance(absl::Hours(2));
  const std::string lease = absl::StrCat("lease ", held.lease, " on half");
  EXPECT_THAT(LeaksOf(alice_),
              ElementsAre(Kind("unsealed_idle", "half"),
                          AllOf(Kind("idle_lease", lease), Field(&Leak::pid, kAlicePid),
                                Field(&Leak::age, absl::Hours(2)),
                                Field(&Leak::evidence, "4 KiB held for 2 hours, pid 5000"))));
}

TEST_F(BrokerLeaksTest, ALeaseIsAsOldAsItsGrantAndItsHolderIsTheOneNamed) {
  Create(alice_, "shared", /*seal=*/true);
  clock_.Advance(absl::Hours(3));
  auto read = broker_->Open(bob_, {"shared", Access::kRead});
  ASSERT_TRUE(read.ok()) << read.status();
  clock_.Advance(absl::Minutes(90));
  // Alice's own lease is 4.5 h old; Bob's, on her buffer, is Bob's leak.
  std::vector<Leak> bobs = LeaksOf(bob_);
  ASSERT_THAT(bobs, ElementsAre(Kind("idle_lease", absl::StrCat("lease ", read->lease,
                                                                " on shared"))));
  EXPECT_EQ(bobs[0].uid, kBob);
  EXPECT_EQ(bobs[0].pid, kBobPid);
  EXPECT_EQ(bobs[0].age, absl::Minutes(90));
  std::vector<Leak> alices = LeaksOf(alice_);
  ASSERT_EQ(alices.size(), 1u);
  EXPECT_EQ(alices[0].age, absl::Minutes(270));
}

TEST_F(BrokerLeaksTest, ASessionWithManyLeasesIsNamedWithItsCount) {
  Create(alice_, "a", /*seal=*/true);
  Create(alice_, "b", /*seal=*/true);
  EXPECT_THAT(LeaksOf(alice_, {.older_than = absl::Hours(1), .many_leases = 3}), IsEmpty());
  std::vector<Leak> leaks = LeaksOf(alice_, {.older_than = absl::Hours(1), .many_leases = 2});
  ASSERT_THAT(leaks, ElementsAre(Kind("many_leases", absl::StrCat("session ", alice_,
                                                                  " (trainer)"))));
  EXPECT_THAT(leaks[0].evidence, HasSubstr("2 leases held"));
  EXPECT_EQ(leaks[0].pid, kAlicePid);
}

TEST_F(BrokerLeaksTest, EachUidSeesItsOwnAndRootSeesEveryUids) {
  Create(alice_, "alice/x", /*seal=*/false);
  Create(bob_, "bob/y", /*seal=*/false);
  const LeakRules now{.older_than = absl::ZeroDuration(), .many_leases = 1};
  for (const Leak& leak : LeaksOf(alice_, now)) EXPECT_EQ(leak.uid, kAlice) << leak.subject;
  for (const Leak& leak : LeaksOf(bob_, now)) EXPECT_EQ(leak.uid, kBob) << leak.subject;
  std::vector<Leak> all = LeaksOf(root_, now);
  // Per uid: the unsealed buffer, its lease, its session; root's own
  // session holds none but the mark is 1.
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all.front().uid, kAlice);
  EXPECT_EQ(all.back().uid, kBob);
}

TEST_F(BrokerLeaksTest, AReportCarriesAtMostTheCapAndCountsTheRest) {
  Create(alice_, "popular", /*seal=*/true);
  for (std::size_t i = 0; i < kMaxLeaksPerReport + 5; ++i) {
    ASSERT_TRUE(broker_->Open(alice_, {"popular", Access::kRead}).ok());
  }
  auto report = broker_->Leaks(alice_, {.older_than = absl::ZeroDuration(), .many_leases = 1});
  ASSERT_TRUE(report.ok()) << report.status();
  // Its creator's lease and the opens: idle leases, then the session.
  EXPECT_EQ(report->leaks.size(), kMaxLeaksPerReport);
  EXPECT_EQ(report->omitted, 7u);
  EXPECT_EQ(report->leaks.front().kind, "idle_lease");
}

TEST_F(BrokerLeaksTest, RulesOutOfRangeAreInvalidArgumentWithTheNumbers) {
  auto negative = broker_->Leaks(alice_, {.older_than = -absl::Seconds(1)});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("-1s"));
  auto decades = broker_->Leaks(alice_, {.older_than = absl::Hours(24 * 3651)});
  EXPECT_EQ(decades.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decades.status().message(), HasSubstr("3650 days"));
  EXPECT_TRUE(broker_->Leaks(alice_, {.older_than = absl::Hours(24 * 3650)}).ok());
  auto none = broker_->Leaks(alice_, {.older_than = absl::Hours(1), .many_leases = 0});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("many_leases is 0"));
  broker_->EndSession(bob_);
  EXPECT_EQ(broker_->Leaks(bob_, {}).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(BrokerLeaksTest, TheSnapshotTotalsEveryUidsLeaksByKindWithTheDefaultRules) {
  Create(alice_, "kept", /*seal=*/true);
  Create(bob_, "half", /*seal=*/false);
  auto zero = [](const std::string& kind) {
    return AllOf(Field(&LeakTotal::kind, kind), Field(&LeakTotal::count, 0u),
                 Field(&LeakTotal::bytes, 0u));
  };
  EXPECT_THAT(broker_->Snapshot().leaks,
              ElementsAre(zero("never_opened"), zero("unsealed_idle"), zero("idle_lease"),
                          zero("many_leases")));
  clock_.Advance(absl::Hours(1));
  auto total = [](const std::string& kind, std::uint64_t count, std::uint64_t bytes) {
    return AllOf(Field(&LeakTotal::kind, kind), Field(&LeakTotal::count, count),
                 Field(&LeakTotal::bytes, bytes));
  };
  EXPECT_THAT(broker_->Snapshot().leaks,
              ElementsAre(total("never_opened", 1, kPage), total("unsealed_idle", 1, kPage),
                          total("idle_lease", 2, 2 * kPage), total("many_leases", 0, 0)));
}

}  // namespace
}  // namespace memd::broker
