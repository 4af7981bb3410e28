// FindLeaks: what looks forgotten, per uid, with the numbers.

#include "daemon/broker/leaks.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;

constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
const absl::Time kNow = absl::UnixEpoch() + absl::Hours(100);

LeakBufferFacts Sealed(const std::string& name, uid_t owner, absl::Duration age) {
  return LeakBufferFacts{name, owner, 4096, true, true, kNow - age, std::nullopt, 42};
}

TEST(LeaksTest, APersistentSealedBufferNeverOpenedIsReportedOnceOldEnough) {
  std::vector<LeakBufferFacts> buffers = {Sealed("old", kAlice, absl::Hours(3)),
                                          Sealed("young", kAlice, absl::Minutes(10))};
  auto leaks = FindLeaks(buffers, {}, {}, kNow);
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].kind, "never_opened");
  EXPECT_EQ(leaks[0].subject, "old");
  EXPECT_EQ(leaks[0].uid, kAlice);
  EXPECT_EQ(leaks[0].age, absl::Hours(3));
  EXPECT_EQ(leaks[0].evidence, "4 KiB, sealed, never opened in 3 hours since it was created, pid 42");
}

TEST(LeaksTest, OpenedEphemeralOrYoungBuffersAreNotLeaks) {
  LeakBufferFacts opened = Sealed("opened", kAlice, absl::Hours(5));
  opened.last_opened = kNow - absl::Hours(4);
  LeakBufferFacts ephemeral = Sealed("ephemeral", kAlice, absl::Hours(5));
  ephemeral.persistent = false;
  std::vector<LeakBufferFacts> buffers = {opened, ephemeral};
  EXPECT_THAT(FindLeaks(buffers, {}, {}, kNow), IsEmpty());
}

TEST(LeaksTest, AnUnsealedBufferLongPastItsCreationIsReported) {
  LeakBufferFacts unsealed = Sealed("half", kBob, absl::Hours(2));
  unsealed.sealed = false;
  std::vector<LeakBufferFacts> buffers = {unsealed};
  auto leaks = FindLeaks(buffers, {}, {}, kNow);
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].kind, "unsealed_idle");
  EXPECT_EQ(leaks[0].evidence, "4 KiB, still not sealed 2 hours after it was created, pid 42");
}

TEST(LeaksTest, OldLeasesAndSessionsWithManyLeasesAreReported) {
  std::vector<LeakLeaseFacts> leases = {{7, "w", kBob, 77, kNow - absl::Hours(26), 1 << 20},
                                        {8, "w", kBob, 77, kNow - absl::Minutes(5), 1 << 20}};
  std::vector<LeakSessionFacts> sessions = {{3, kBob, 77, "trainer", 5000},
                                            {4, kAlice, 88, "reader", 10}};
  auto leaks = FindLeaks({}, leases, sessions, kNow);
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].kind, "idle_lease");
  EXPECT_EQ(leaks[0].subject, "lease 7 on w");
  EXPECT_EQ(leaks[0].evidence, "1 MiB held for 1 day, pid 77");
  EXPECT_EQ(leaks[1].kind, "many_leases");
  EXPECT_EQ(leaks[1].subject, "session 3 (trainer)");
  EXPECT_EQ(leaks[1].evidence, "5000 leases held (the report's mark is 1024), pid 77");
}

TEST(LeaksTest, OrderedByUidThenKindThenOldestFirst) {
  LeakBufferFacts unsealed = Sealed("b-half", kAlice, absl::Hours(9));
  unsealed.sealed = false;
  std::vector<LeakBufferFacts> buffers = {Sealed("z", kBob, absl::Hours(2)), unsealed,
                                          Sealed("a-new", kAlice, absl::Hours(2)),
                                          Sealed("a-old", kAlice, absl::Hours(8))};
  auto leaks = FindLeaks(buffers, {}, {}, kNow);
  EXPECT_THAT(leaks, ElementsAre(Field(&Leak::subject, "a-old"), Field(&Leak::subject, "a-new"),
                                 Field(&Leak::subject, "b-half"), Field(&Leak::subject, "z")));
}

TEST(LeaksTest, TheRulesMoveTheMarks) {
  std::vector<LeakBufferFacts> buffers = {Sealed("w", kAlice, absl::Minutes(30))};
  EXPECT_THAT(FindLeaks(buffers, {}, {}, kNow), IsEmpty());
  LeakRules rules;
  rules.older_than = absl::Minutes(20);
  EXPECT_EQ(FindLeaks(buffers, {}, {}, kNow, rules).size(), 1u);
}

// The metrics count by the report's own rules: every kind, each total what
// FindLeaks lists of it.
TEST(LeaksTest, CountLeaksTotalsWhatFindLeaksListsPerKind) {
  LeakBufferFacts unsealed = Sealed("half", kBob, absl::Hours(2));
  unsealed.sealed = false;
  LeakFacts facts;
  facts.buffers = {Sealed("old", kAlice, absl::Hours(3)), Sealed("young", kAlice, absl::Minutes(1)),
                   unsealed};
  facts.leases = {{7, "w", kBob, 77, kNow - absl::Hours(26), 1 << 20},
                  {8, "w", kBob, 77, kNow - absl::Hours(2), 1 << 20},
                  {9, "w", kBob, 77, kNow, 1 << 20}};
  std::vector<LeakTotal> totals = CountLeaks(facts, kNow);
  ASSERT_EQ(totals.size(), kLeakKinds.size());
  const std::vector<Leak> found = FindLeaks(facts.buffers, facts.leases, facts.sessions, kNow);
  for (std::size_t i = 0; i < kLeakKinds.size(); ++i) {
    EXPECT_EQ(totals[i].kind, kLeakKinds[i]);
    std::uint64_t count = 0, bytes = 0;
    for (const Leak& leak : found) {
      if (leak.kind != kLeakKinds[i]) continue;
      ++count;
      bytes += leak.bytes;
    }
    EXPECT_EQ(totals[i].count, count) << kLeakKinds[i];
    EXPECT_EQ(totals[i].bytes, bytes) << kLeakKinds[i];
  }
  EXPECT_EQ(totals[2].count, 2u);
  EXPECT_EQ(totals[3].count, 0u);
}

TEST(LeaksTest, CapLeaksKeepsTheFirstAndCountsTheRest) {
  std::vector<Leak> leaks(5);
  for (std::size_t i = 0; i < leaks.size(); ++i) leaks[i].subject = std::to_string(i);
  LeakReport capped = CapLeaks(leaks, 3);
  EXPECT_THAT(capped.leaks, ElementsAre(Field(&Leak::subject, "0"), Field(&Leak::subject, "1"),
                                        Field(&Leak::subject, "2")));
  EXPECT_EQ(capped.omitted, 2u);
  EXPECT_EQ(CapLeaks(leaks, 5).omitted, 0u);
  EXPECT_EQ(CapLeaks(leaks).leaks.size(), 5u);
}

}  // namespace
}  // namespace memd::broker
