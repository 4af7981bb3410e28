// Waiting opens, OpenOrCreate, and demanding the producer (BrokerTest).

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/broker_fixture.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- Waiting opens ----

TEST_F(BrokerTest, WatchWakesOnSealAndTheRetryGetsTheBuffer) {
  SessionId producer = Start(Peer(kAlice, kStaff));
  SessionId consumer = Start(Peer(kAlice, kStaff));
  std::atomic<int> woken{0};
  WatchId watch = broker_->NewWatchId();
  auto first = broker_->OpenOrWatch(consumer, {"late", Access::kRead}, watch,
                                    [&] { ++woken; });
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());  // Not there yet: waiting.

  auto grant = broker_->Create(producer, Params("late", 2));
  ASSERT_TRUE(grant.ok());
  EXPECT_EQ(woken.load(), 0);  // Created is not enough.
  ASSERT_TRUE(broker_->Seal(producer, grant->lease).ok());
  EXPECT_EQ(woken.load(), 1);

  auto retry = broker_->OpenOrWatch(consumer, {"late", Access::kRead},
                                    broker_->NewWatchId(), [&] { ++woken; });
  ASSERT_TRUE(retry.ok());
  ASSERT_TRUE(retry->has_value());
  EXPECT_EQ((*retry)->buffer.state, BufferState::kSealed);
  EXPECT_FALSE(broker_->CancelWatch(watch));  // Already woken.
}

TEST_F(BrokerTest, CancelledWatchDoesNotWake) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  bool woken = false;
  WatchId watch = broker_->NewWatchId();
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead}, watch,
                                   [&] { woken = true; }).ok());
  EXPECT_TRUE(broker_->CancelWatch(watch));
  Publish(alice, "x", "1");
  EXPECT_FALSE(woken);
}

TEST_F(BrokerTest, EndingTheSessionWakesItsWatchesToFail) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  bool woken = false;
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [&] { woken = true; })
                  .ok());
  broker_->EndSession(alice);
  EXPECT_TRUE(woken);
}

// Wakes run once the broker's mutex is released: a wake that retries at once
// (as the service's does) would otherwise deadlock.
TEST_F(BrokerTest, AWakeRetriesInsideTheSealThatWokeIt) {
  SessionId producer = Start(Peer(kAlice, kStaff));
  SessionId consumer = Start(Peer(kAlice, kStaff));
  absl::StatusOr<std::optional<Grant>> retried;
  ASSERT_TRUE(broker_->OpenOrWatch(consumer, {"late", Access::kRead},
                                   broker_->NewWatchId(), [&] {
                                     retried = broker_->OpenOrWatch(
                                         consumer, {"late", Access::kRead},
                                         broker_->NewWatchId(), nullptr);
                                   })
                  .ok());
  Publish(producer, "late", "x");
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_TRUE(retried->has_value());
  EXPECT_EQ((*retried)->buffer.name, "late");
}

TEST_F(BrokerTest, AWakeRetriesInsideTheSessionEndThatWokeItAndIsRefused) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  absl::Status retried;
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead}, broker_->NewWatchId(),
                                   [&] {
                                     retried = broker_->Open(alice, {"x", Access::kRead})
                                                   .status();
                                   })
                  .ok());
  broker_->EndSession(alice);
  EXPECT_TRUE(absl::IsUnauthenticated(retried)) << retried;
}

TEST_F(BrokerTest, AWaitRefusedByALimitIsCountedAndAnEndedWaitGivesItsPlaceBack) {
  BrokerLimits limits;
  limits.max_waits_per_uid = 1;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId again = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [] {}).ok());
  EXPECT_EQ(broker_->OpenOrWatch(again, {"y", Access::kRead}, broker_->NewWatchId(),
                                 [] {}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(broker_->Counts().rejections.waits_per_uid, 1u);
  broker_->EndSession(alice);
  auto waits = broker_->OpenOrWatch(again, {"y", Access::kRead}, broker_->NewWatchId(),
                                    [] {});
  ASSERT_TRUE(waits.ok()) << waits.status();
  EXPECT_FALSE(waits->has_value());
}

TEST_F(BrokerTest, WatchesPerSessionAreLimited) {
  BrokerLimits limits;
  limits.max_waits_per_session = 1;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [] {}).ok());
  auto second = broker_->OpenOrWatch(alice, {"y", Access::kRead},
                                     broker_->NewWatchId(), [] {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(), HasSubstr("the limit is 1"));
}

TEST_F(BrokerTest, WatchDoesNotHidePermissionDenied) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "private", "x");
  auto attempt = broker_->OpenOrWatch(bob, {"private", Access::kRead},
                                      broker_->NewWatchId(), [] {});
  EXPECT_EQ(attempt.status().code(), absl::StatusCode::kPermissionDenied);
}

// ---- OpenOrCreate ----

TEST_F(BrokerTest, OpenOrCreateCreatesOnceThenOpens) {
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  auto created = broker_->OpenOrCreate(first, Params("shared", 8),
                                       broker_->NewWatchId(), nullptr);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->has_value());
  EXPECT_TRUE((*created)->created);
  EXPECT_EQ((*created)->access, Access::kReadWrite);

  // Unsealed and no wake: the second caller hears why it cannot read yet.
  auto early = broker_->OpenOrCreate(second, Params("shared", 8),
                                     broker_->NewWatchId(), nullptr);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(broker_->Seal(first, (*created)->lease).ok());
  auto opened = broker_->OpenOrCreate(second, Params("shared", 8),
                                      broker_->NewWatchId(), nullptr);
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(opened->has_value());
  EXPECT_FALSE((*opened)->created);
  EXPECT_EQ((*opened)->access, Access::kRead);
}

TEST_F(BrokerTest, OpenOrCreateWithADifferentSizeIsFailedPrecondition) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Publish(alice, "a", "1234");
  auto mismatch = broker_->OpenOrCreate(alice, Params("a", 5),
                                        broker_->NewWatchId(), nullptr);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mismatch.status().message(), HasSubstr("exists with size 4"));
}

// ---- Demanding the producer; what OpenOrCreate tells ----

TEST_F(BrokerTest, AnExpectedOwnerRefusesBuffersOfAnyOtherOwner) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "result", "x", 0644);
  OpenParams demand{"result", Access::kRead, kAlice};
  EXPECT_TRUE(broker_->Open(bob, demand).ok());
  demand.expected_owner = kBob;
  auto denied = broker_->Open(bob, demand);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(),
            "buffer 'result' is owned by uid 1000, not by the demanded uid 1001 "
            "(a name belongs to whoever creates it first)");
  demand.expected_owner = 0;
  EXPECT_EQ(broker_->Open(root, demand).status().code(),
            absl::StatusCode::kPermissionDenied)
      << "root may read anything, but it is not the owner";
}

TEST_F(BrokerTest, TheOwnerIsCheckedOnlyAfterTheReadPermission) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  Publish(alice, "private", "x", 0600);
  auto denied = broker_->Open(bob, {"private", Access::kRead, kBob});
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("may not read"));
  EXPECT_THAT(denied.status().message(), Not(HasSubstr("demanded")));
}

TEST_F(BrokerTest, AWaitWokenByAForgedSealIsDenied) {
  SessionId consumer = Start(Peer(kBob, kOther));
  SessionId forger = Start(Peer(1003, 1003));
  const OpenParams demand{"late", Access::kRead, kAlice};
  std::atomic<int> woken{0};
  auto first = broker_->OpenOrWatch(consumer, demand, broker_->NewWatchId(),
                                    [&] { ++woken; });
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->has_value());
  Publish(forger, "late", "forged", 0644);
  EXPECT_EQ(woken.load(), 1);
  // The retry the wake calls for (service/waiting_open) is refused.
  auto retry = broker_->OpenOrWatch(consumer, demand, broker_->NewWatchId(), [] {});
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(retry.status().message(), HasSubstr("owned by uid 1003"));
  // Without the demand, the forgery would have been handed out.
  EXPECT_TRUE(broker_->Open(consumer, {"late", Access::kRead}).ok());
}

TEST_F(BrokerTest, OpenOrCreateChecksTheExpectedOwnerOfAnExistingBuffer) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  Publish(alice, "shared", "12345678", 0644);
  CreateParams params = Params("shared", 8);
  params.expected_owner = kAlice;
  auto opened = broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_FALSE((*opened)->created);
  params.expected_owner = kBob;
  EXPECT_EQ(broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A free name is created, and the creator owns it whatever it expected.
  params.name = "fresh";
  params.expected_owner = kAlice;
  auto created = broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE((*created)->created);
  EXPECT_EQ((*created)->buffer.owner_uid, kBob);
}

TEST_F(BrokerTest, OpenOrCreateOfAnUnreadableBufferTellsNeitherSizeNorLocation) {
  MakeBroker(BrokerLimits{}, /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  CreateParams secret = Params("secret", 12345);
  secret.location = Location::Device(0);
  ASSERT_TRUE(broker_->Create(alice, secret).ok());
  for (CreateParams guess : {Params("secret", 1), secret}) {
    auto denied = broker_->OpenOrCreate(bob, guess, broker_->NewWatchId(), {});
    EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("12345")));
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("device")));
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("size")));
  }
}

}  // namespace
}  // namespace memd::broker
