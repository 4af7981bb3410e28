#include "daemon/broker/waiters.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;

// Registers watches whose wakes append their label to `woken`, so a test
// sees which callbacks came back by running them.
class WaitersTest : public ::testing::Test {
 protected:
  absl::Status Add(const std::string& label, SessionId session, uid_t uid,
                   const std::string& name, WatchId* id = nullptr) {
    const WatchId watch = waiters_.NewId();
    if (id != nullptr) *id = watch;
    return waiters_.Add(watch, session, uid, name,
                        [this, label] { woken_.push_back(label); }, limits_);
  }

  void Run(std::vector<Waiters::Wake> wakes) {
    for (auto& wake : wakes) wake();
  }

  Waiters waiters_;
  BrokerLimits limits_;
  std::vector<std::string> woken_;
};

TEST_F(WaitersTest, NewIdsAreDistinctAndNeverZero) {
  const WatchId first = waiters_.NewId();
  const WatchId second = waiters_.NewId();
  EXPECT_NE(first, 0u);
  EXPECT_NE(first, second);
}

TEST_F(WaitersTest, ASealHandsBackTheWatchesOfItsNameInOrderAndNoOthers) {
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 2, kBob, "y").ok());
  ASSERT_TRUE(Add("c", 1, kAlice, "x").ok());
  std::vector<Waiters::Wake> wakes = waiters_.TakeName("x");
  EXPECT_TRUE(woken_.empty()) << "a callback ran inside Waiters";
  Run(std::move(wakes));
  EXPECT_THAT(woken_, ElementsAre("a", "c"));
  EXPECT_EQ(waiters_.size(), 1u);
  EXPECT_TRUE(waiters_.TakeName("x").empty());
}

TEST_F(WaitersTest, ASessionsEndHandsBackItsWatchesOnly) {
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 1, kAlice, "y").ok());
  ASSERT_TRUE(Add("c", 2, kAlice, "x").ok());
  Run(waiters_.TakeSession(1));
  EXPECT_THAT(woken_, UnorderedElementsAre("a", "b"));
  EXPECT_EQ(waiters_.waits_of_session(1), 0u);
  EXPECT_EQ(waiters_.waits_of_uid(kAlice), 1u);
  // The other session's watch on "x" is still there for the seal.
  woken_.clear();
  Run(waiters_.TakeName("x"));
  EXPECT_THAT(woken_, ElementsAre("c"));
}

TEST_F(WaitersTest, ACancelledWatchIsNeverHandedBack) {
  WatchId id = 0;
  ASSERT_TRUE(Add("a", 1, kAlice, "x", &id).ok());
  EXPECT_TRUE(waiters_.Cancel(id));
  EXPECT_FALSE(waiters_.Cancel(id));
  EXPECT_TRUE(waiters_.TakeName("x").empty());
  EXPECT_TRUE(waiters_.TakeSession(1).empty());
  EXPECT_EQ(waiters_.size(), 0u);
  EXPECT_EQ(waiters_.waits_of_uid(kAlice), 0u);
}

TEST_F(WaitersTest, CancelAfterTheWakeWasTakenSaysSo) {
  WatchId id = 0;
  ASSERT_TRUE(Add("a", 1, kAlice, "x", &id).ok());
  Run(waiters_.TakeName("x"));
  EXPECT_FALSE(waiters_.Cancel(id)) << "the wake won the race";
}

TEST_F(WaitersTest, AnIdMayWaitAgainOnceItsWakeWasTaken) {
  WatchId id = 0;
  ASSERT_TRUE(Add("a", 1, kAlice, "x", &id).ok());
  Run(waiters_.TakeName("x"));
  ASSERT_TRUE(waiters_.Add(id, 1, kAlice, "x", [this] { woken_.push_back("again"); },
                           limits_).ok());
  Run(waiters_.TakeName("x"));
  EXPECT_THAT(woken_, ElementsAre("a", "again"));
}

TEST_F(WaitersTest, EveryWayOutGivesBackItsPlaceUnderTheLimits) {
  limits_.max_waits_per_session = 1;
  WatchId id = 0;
  ASSERT_TRUE(Add("a", 1, kAlice, "x", &id).ok());
  EXPECT_FALSE(Add("b", 1, kAlice, "y").ok());
  ASSERT_TRUE(waiters_.Cancel(id));
  ASSERT_TRUE(Add("c", 1, kAlice, "y").ok());
  Run(waiters_.TakeName("y"));
  ASSERT_TRUE(Add("d", 1, kAlice, "z").ok());
  Run(waiters_.TakeSession(1));
  EXPECT_TRUE(Add("e", 1, kAlice, "z").ok());
}

TEST_F(WaitersTest, WaitsPerSessionAreLimitedWithTheNumbersAndTheKey) {
  limits_.max_waits_per_session = 2;
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 1, kAlice, "y").ok());
  absl::Status refused = Add("c", 1, kAlice, "z");
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(refused.message(),
            "session 1 already waits in 2 calls (Open, Create, WaitTransfer); the limit is 2 "
            "(max_waits_per_session)");
  EXPECT_TRUE(Add("d", 2, kAlice, "z").ok()) << "another session has its own";
  EXPECT_EQ(waiters_.rejections().per_session, 1u);
}

TEST_F(WaitersTest, WaitsPerUidAreLimitedAcrossItsSessions) {
  limits_.max_waits_per_uid = 2;
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 2, kAlice, "x").ok());
  absl::Status refused = Add("c", 3, kAlice, "x");
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(refused.message(),
            "uid 1000 has 2 calls waiting (Open, Create, WaitTransfer); the limit is 2 "
            "(max_waits_per_uid)");
  EXPECT_TRUE(Add("d", 4, kBob, "x").ok());
  EXPECT_EQ(waiters_.rejections().per_uid, 1u);
}

TEST_F(WaitersTest, WaitsAreLimitedDaemonWide) {
  limits_.max_waits = 2;
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 2, kBob, "x").ok());
  absl::Status refused = Add("c", 3, 1002, "x");
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("(max_waits)"));
  EXPECT_EQ(waiters_.rejections().total, 1u);
  EXPECT_EQ(waiters_.size(), 2u);
}

TEST_F(WaitersTest, ARefusedWaitRegistersNothing) {
  limits_.max_waits = 0;
  EXPECT_FALSE(Add("a", 1, kAlice, "x").ok());
  EXPECT_EQ(waiters_.size(), 0u);
  EXPECT_EQ(waiters_.waits_of_session(1), 0u);
  EXPECT_EQ(waiters_.waits_of_uid(kAlice), 0u);
  EXPECT_TRUE(waiters_.TakeName("x").empty());
}

TEST_F(WaitersTest, ClearForgetsEveryWatchWithoutWakingAny) {
  ASSERT_TRUE(Add("a", 1, kAlice, "x").ok());
  ASSERT_TRUE(Add("b", 2, kBob, "y").ok());
  waiters_.Clear();
  EXPECT_EQ(waiters_.size(), 0u);
  EXPECT_TRUE(waiters_.TakeName("x").empty());
  EXPECT_TRUE(waiters_.TakeSession(2).empty());
  EXPECT_TRUE(woken_.empty());
}

}  // namespace
}  // namespace memd::broker
