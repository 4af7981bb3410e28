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

}  // namespace
}  // namespace memd::broker
