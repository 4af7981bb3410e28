// PlanEviction: what memory pressure takes back at one location, in which
// order, and what it never touches.

#include "daemon/broker/eviction.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;

absl::Time At(int minute) { return absl::UnixEpoch() + absl::Minutes(minute); }

EvictionCandidate Buffer(std::uint64_t id, uid_t uid, std::uint64_t bytes, int used_minute) {
  return EvictionCandidate{id, uid, bytes, At(used_minute)};
}

TEST(EvictionTest, LeastRecentlyUsedGoesFirstAndOnlyAsMuchAsNeeded) {
  const std::vector<EvictionCandidate> candidates = {
      Buffer(1, kAlice, 100, 30), Buffer(2, kAlice, 100, 10), Buffer(3, kAlice, 100, 20)};
  auto plan = PlanEviction(candidates, {}, 150);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->victims, ElementsAre(2, 3));
  EXPECT_EQ(plan->bytes, 200u);
}

TEST(EvictionTest, LeasedAndPinnedAreNeverTaken) {
  std::vector<EvictionCandidate> candidates = {
      Buffer(1, kAlice, 100, 1), Buffer(2, kAlice, 100, 2), Buffer(3, kAlice, 100, 3)};
  candidates[0].leased = true;
  candidates[1].pinned = true;
  auto plan = PlanEviction(candidates, {}, 100);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->victims, ElementsAre(3));
}

TEST(EvictionTest, APlanThatCannotServeTheRequestTakesNothingAndSaysWhy) {
  std::vector<EvictionCandidate> candidates = {Buffer(1, kAlice, 100, 1),
                                               Buffer(2, kBob, 300, 2)};
  candidates[1].leased = true;
  auto plan = PlanEviction(candidates, {}, 200);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("could free 100 bytes (100 B) of the 200 (200 B) needed; 300 bytes are "
                        "leased and 0 pinned"));
}

TEST(EvictionTest, DemotionsComeBeforeEvictionsWhateverTheirAge) {
  std::vector<EvictionCandidate> candidates = {Buffer(1, kAlice, 100, 1),
                                               Buffer(2, kAlice, 100, 50)};
  candidates[1].demotable = true;  // A copy whose buffer lives on elsewhere.
  auto plan = PlanEviction(candidates, {}, 150);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->victims, ElementsAre(2, 1));
}

TEST(EvictionTest, TheUidMostOverItsShareGivesFirstEvenItsNewestBytes) {
  // Bob holds 900 of 1000 bytes here; Alice 100. Alice's buffer is older.
  const std::vector<EvictionCandidate> candidates = {
      Buffer(1, kAlice, 100, 1), Buffer(2, kBob, 300, 40), Buffer(3, kBob, 300, 50),
      Buffer(4, kBob, 300, 60)};
  const std::vector<UidHolding> holdings = {{kAlice, 100}, {kBob, 900}};
  auto plan = PlanEviction(candidates, holdings, 600);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->victims, ElementsAre(2, 3));
}

TEST(EvictionTest, SharesAreRankedAgainAfterEveryChoice) {
  // Alice 500, Bob 400, total 900 over 2 uids: fair 450. Alice is over by
  // 50 and gives 200 first; then Bob (400 against Alice's 300) is over.
  const std::vector<EvictionCandidate> candidates = {
      Buffer(1, kAlice, 200, 10), Buffer(2, kAlice, 300, 11), Buffer(3, kBob, 200, 20),
      Buffer(4, kBob, 200, 21)};
  const std::vector<UidHolding> holdings = {{kAlice, 500}, {kBob, 400}};
  auto plan = PlanEviction(candidates, holdings, 400);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->victims, ElementsAre(1, 3));
}

TEST(EvictionTest, HoldingsCountWhatIsNotEvictableToo) {
  // Alice's only candidate is small, but she holds 10000 bytes here in
  // leased buffers: she is the one over her share.
  std::vector<EvictionCandidate> candidates = {Buffer(1, kAlice, 100, 50),
                                               Buffer(2, kBob, 100, 1)};
  const std::vector<UidHolding> holdings = {{kAlice, 10000}, {kBob, 100}};
  auto plan = PlanEviction(candidates, holdings, 100);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->victims, ElementsAre(1));
}

// A requester that would be over its fair share takes back only its own:
// else a uid sitting on pinned data could push everyone else's out, and
// again after each of their re-opens.
TEST(EvictionTest, ARequesterOverItsFairShareTakesBackOnlyItsOwnData) {
  // Bob holds 700 here, pinned; Alice 300 in a demotable copy.
  std::vector<EvictionCandidate> candidates = {Buffer(1, kAlice, 300, 1),
                                               Buffer(2, kBob, 700, 50)};
  candidates[0].demotable = true;
  candidates[1].pinned = true;
  const std::vector<UidHolding> holdings = {{kAlice, 300}, {kBob, 700}};
  // Bob asking 300 more would hold 1000 of 1300 (fair: 650): nothing of
  // Alice's goes.
  auto refused = PlanEviction(candidates, holdings, 300, EvictionRequester{kBob, 300});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("could free 0 bytes (0 B) of the 300 (300 B) needed; 0 bytes are leased "
                        "and 700 pinned, which are never evicted; uid 1001 would hold 1000 B of "));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("over its fair share (2 users), so only its own data may give way"));
  // Without a requester (the old rule) Alice's copy would have gone.
  auto anyone = PlanEviction(candidates, holdings, 300);
  ASSERT_TRUE(anyone.ok()) << anyone.status();
  EXPECT_THAT(anyone->victims, ElementsAre(1));
  // Alice asking 300 would hold 600 of 1300, within her share: her own
  // copy is the only candidate there is, and it goes.
  auto within = PlanEviction(candidates, holdings, 300, EvictionRequester{kAlice, 300});
  ASSERT_TRUE(within.ok()) << within.status();
  EXPECT_THAT(within->victims, ElementsAre(1));
  // Carol, holding nothing, asks 500: 500 of 1500 over 3 users is her
  // share exactly, and Alice's copy goes for her.
  auto carol = PlanEviction(candidates, holdings, 300, EvictionRequester{1002, 500});
  ASSERT_TRUE(carol.ok()) << carol.status();
  EXPECT_THAT(carol->victims, ElementsAre(1));
}

TEST(EvictionTest, BadRequestsAreInvalidArgument) {
  const std::vector<EvictionCandidate> twice = {Buffer(1, kAlice, 1, 1),
                                                Buffer(1, kBob, 1, 1)};
  EXPECT_EQ(PlanEviction(twice, {}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanEviction({}, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EvictionTest, APlanIsBoundedInVictims) {
  std::vector<EvictionCandidate> many;
  for (std::uint64_t i = 1; i <= kMaxVictimsPerPlan + 1; ++i) {
    many.push_back(Buffer(i, kAlice, 1, static_cast<int>(i)));
  }
  auto plan = PlanEviction(many, {}, kMaxVictimsPerPlan + 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(), HasSubstr("more than 1024 evictions"));
  EXPECT_TRUE(PlanEviction(many, {}, kMaxVictimsPerPlan).ok());
}

}  // namespace
}  // namespace memd::broker
