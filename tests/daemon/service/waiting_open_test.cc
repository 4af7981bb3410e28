// A waiting open against a real broker, with a fake call whose alarm rings
// when the test says, and (for the races) an opener that holds the broker's
// wake back until the test lets it through.

#include "daemon/service/waiting_open.h"

#include <memory>
#include <optional>
#include <vector>

#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/fake_clock.h"

namespace memd::service {
namespace {

using ::testing::HasSubstr;
using State = WaitingOpen::State;
using Event = WaitingOpen::Event;

// Records what the wait does to its call.
class FakeCall : public WaitingOpen::Call {
 public:
  void SetAlarm(Alarm alarm, absl::Duration wait, std::function<void()> ring) override {
    if (alarm == Alarm::kMemory) {
      memory_alarm_wait = wait;
      ring_memory = std::move(ring);
      return;
    }
    ++alarms_set;
    alarm_wait = wait;
    this->ring = std::move(ring);
  }
  absl::Status Deliver(broker::Grant grant) override {
    delivered.push_back(std::move(grant));
    return deliver_status;
  }
  void End(const absl::Status& status) override { ended.push_back(status); }

  int alarms_set = 0;
  absl::Duration alarm_wait;
  std::function<void()> ring;
  std::optional<absl::Duration> memory_alarm_wait;
  std::function<void()> ring_memory;
  absl::Status deliver_status;  // What Deliver answers.
  std::vector<broker::Grant> delivered;
  std::vector<absl::Status> ended;
};

// The broker's opener, but each wake waits in `held` until the test runs it:
// the wake is "on its way".
class HoldingOpener : public Opener {
 public:
  HoldingOpener(broker::Broker& broker, broker::SessionId session, OpenRequest request,
                std::vector<std::function<void()>>& held)
      : real_(broker, session, std::move(request)), held_(held) {}
  absl::StatusOr<std::optional<broker::Grant>> Try(std::function<void()> woken) override {
    return real_.Try([this, woken] { held_.push_back(woken); });
  }
  bool CancelWatch() override { return real_.CancelWatch(); }

 private:
  BrokerOpener real_;
  std::vector<std::function<void()>>& held_;
};

class WaitingOpenTest : public ::testing::Test {
 protected:
  WaitingOpenTest() {
    pools_.Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(),
                                                   pool::CarvingPoolOptions{}, clock_));
    const PeerCredentials peer{4000, 1000, 1000, {}};
    producer_ = *broker_.StartSession(peer, "producer");
    consumer_ = *broker_.StartSession(peer, "consumer");
  }

  // Starts a wait for `name` by the consumer, through `opener` if given.
  std::shared_ptr<WaitingOpen> Wait(const std::string& name,
                                    std::unique_ptr<Opener> opener = nullptr) {
    if (opener == nullptr) {
      opener = std::make_unique<BrokerOpener>(
          broker_, consumer_, broker::OpenParams{name, broker::Access::kRead});
    }
    auto waiting = std::make_shared<WaitingOpen>(std::move(opener), name,
                                                 absl::Seconds(5), call_);
    waiting->Start();
    return waiting;
  }
  std::unique_ptr<Opener> Holding(const std::string& name) {
    return std::make_unique<HoldingOpener>(
        broker_, consumer_, broker::OpenParams{name, broker::Access::kRead}, held_);
  }

  // The producer creates `name`; returns the lease.
  broker::LeaseId Create(const std::string& name) {
    auto created = broker_.Create(producer_, broker::CreateParams{name, 4096, Location::Host()});
    EXPECT_TRUE(created.ok()) << created.status();
    return created->lease;
  }
  broker::LeaseId Publish(const std::string& name) {
    const broker::LeaseId lease = Create(name);
    EXPECT_TRUE(broker_.Seal(producer_, lease).ok());
    return lease;
  }
  void RunHeldWakes() {
    std::vector<std::function<void()>> wakes = std::move(held_);
    held_.clear();
    for (auto& wake : wakes) wake();
  }

  test::FakeBackend backend_;
  test::FakeClock clock_;
  pool::PoolSet pools_;
  broker::Broker broker_{pools_, broker::BrokerLimits{}, clock_};
  broker::SessionId producer_ = 0;
  broker::SessionId consumer_ = 0;
  FakeCall call_;
  std::vector<std::function<void()>> held_;
};

TEST_F(WaitingOpenTest, ASealedBufferIsDeliveredAtOnceWithoutAnAlarm) {
  Publish("ready");
  auto waiting = Wait("ready");
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.delivered.size(), 1u);
  EXPECT_EQ(call_.delivered[0].buffer.name, "ready");
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok()) << call_.ended[0];
  EXPECT_EQ(call_.alarms_set, 0);
}

TEST_F(WaitingOpenTest, AFirstTryThatFailsEndsTheCallWithItsError) {
  broker_.EndSession(consumer_);
  auto waiting = Wait("x");
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsUnauthenticated(call_.ended[0])) << call_.ended[0];
  EXPECT_EQ(call_.alarms_set, 0);
}

TEST_F(WaitingOpenTest, AMissingNameWaitsWithOneAlarmForTheWholeWait) {
  auto waiting = Wait("late");
  EXPECT_EQ(waiting->state(), State::kWaiting);
  EXPECT_EQ(call_.alarms_set, 1);
  EXPECT_EQ(call_.alarm_wait, absl::Seconds(5));
  EXPECT_TRUE(call_.ended.empty());
  // Created but not sealed: no wake, still waiting.
  Create("late");
  EXPECT_EQ(waiting->state(), State::kWaiting);
}

TEST_F(WaitingOpenTest, TheSealWakesTheWaitAndTheGrantIsDelivered) {
  auto waiting = Wait("late");
  Publish("late");
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.delivered.size(), 1u);
  EXPECT_EQ(call_.delivered[0].buffer.state, broker::BufferState::kSealed);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok());
}

TEST_F(WaitingOpenTest, AFailedDeliveryEndsTheCallWithItsStatus) {
  call_.deliver_status = absl::UnavailableError("the client is gone");
  auto waiting = Wait("late");
  Publish("late");
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsUnavailable(call_.ended[0])) << call_.ended[0];
}

TEST_F(WaitingOpenTest, TheAlarmEndsTheWaitAndTakesItsWatchBack) {
  auto waiting = Wait("late");
  const broker::LeaseId lease = Create("late");  // Being written.
  call_.ring();
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(call_.ended[0])) << call_.ended[0];
  EXPECT_EQ(call_.ended[0].message(), "buffer 'late' was not sealed within 5s");
  // The watch is gone: a seal now delivers nothing.
  ASSERT_TRUE(broker_.Seal(producer_, lease).ok());
  EXPECT_TRUE(call_.delivered.empty());
  EXPECT_EQ(call_.ended.size(), 1u);
}

// Issue 29: a misspelt name was "not sealed within 10s".
TEST_F(WaitingOpenTest, TheAlarmSaysANameThatNeverExistedDoesNotExist) {
  auto waiting = Wait("never");
  call_.ring();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(call_.ended[0])) << call_.ended[0];
  EXPECT_THAT(std::string(call_.ended[0].message()),
              HasSubstr("buffer 'never' does not exist: there was none when the wait "
                        "began, nor 5s later"));
}

TEST_F(WaitingOpenTest, ANameThatExistedDuringTheWaitWasNotSealed) {
  // There when the wait began, gone before the alarm: not "does not exist".
  const broker::LeaseId lease = Create("brief");
  auto waiting = Wait("brief");
  ASSERT_TRUE(broker_.Unlink(producer_, "brief").ok());
  ASSERT_TRUE(broker_.Release(producer_, lease).ok());
  call_.ring();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_EQ(call_.ended[0].message(), "buffer 'brief' was not sealed within 5s");
}

TEST_F(WaitingOpenTest, ACancelledCallEndsAndTakesItsWatchBack) {
  auto waiting = Wait("late");
  waiting->On(Event::kCancelled);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(call_.ended[0])) << call_.ended[0];
  Publish("late");
  EXPECT_TRUE(call_.delivered.empty());
  EXPECT_EQ(call_.ended.size(), 1u);
}

TEST_F(WaitingOpenTest, TheEndOfTheWaitersSessionEndsTheWaitUnauthenticated) {
  auto waiting = Wait("late");
  broker_.EndSession(consumer_);
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsUnauthenticated(call_.ended[0])) << call_.ended[0];
}

TEST_F(WaitingOpenTest, EventsAfterTheEndAreIgnored) {
  auto waiting = Wait("late");
  waiting->On(Event::kCancelled);
  call_.ring();
  waiting->On(Event::kCancelled);
  waiting->On(Event::kWake);
  EXPECT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.delivered.empty());
}

TEST_F(WaitingOpenTest, AWakeOnItsWayWhenTheAlarmRingsStillDelivers) {
  auto waiting = Wait("late", Holding("late"));
  Publish("late");  // Takes the watch; its wake is held on its way.
  call_.ring();
  EXPECT_EQ(waiting->state(), State::kOverdue);
  EXPECT_TRUE(call_.ended.empty()) << "the wake owns the end";
  RunHeldWakes();
  ASSERT_EQ(call_.delivered.size(), 1u);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok()) << call_.ended[0];
}

TEST_F(WaitingOpenTest, AWaitWokenAsItsAlarmFiresStillEndsAtItsDeadline) {
  // Finding 13 of issue 9: a seal woke the waiter just as its alarm fired;
  // the alarm, finding no watch to cancel, left the end to the wake; the
  // wake found the name gone and waited again, with no alarm left: the call
  // never ended.
  auto waiting = Wait("late", Holding("late"));
  const broker::LeaseId lease = Publish("late");
  call_.ring();
  EXPECT_TRUE(call_.ended.empty());
  // By the time the wake arrives the name is gone, so it would wait again.
  ASSERT_TRUE(broker_.Release(producer_, lease).ok());
  ASSERT_TRUE(broker_.Unlink(producer_, "late").ok());
  RunHeldWakes();
  EXPECT_EQ(waiting->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u) << "the wait outlived its deadline";
  EXPECT_TRUE(absl::IsDeadlineExceeded(call_.ended[0])) << call_.ended[0];
  EXPECT_EQ(call_.alarms_set, 1);
}

TEST_F(WaitingOpenTest, AnOpenOrCreateWaitsForTheNameItDidNotCreate) {
  const broker::LeaseId lease = Create("shared");  // Still being written.
  auto waiting = Wait("shared", std::make_unique<BrokerOpener>(
                                    broker_, consumer_,
                                    broker::CreateParams{"shared", 4096, Location::Host()}));
  EXPECT_EQ(waiting->state(), State::kWaiting);
  ASSERT_TRUE(broker_.Seal(producer_, lease).ok());
  ASSERT_EQ(call_.delivered.size(), 1u);
  EXPECT_FALSE(call_.delivered[0].created);
}

// A memory wait shorter than the call's (wait_for_memory_ms under a longer
// seal or copy wait): its alarm ends only a call still waiting for memory.
TEST(WaitingOpenMemoryTest, TheMemoryAlarmEndsOnlyACallStillWaitingForMemory) {
  test::FakeBackend backend;
  test::FakeClock clock;
  pool::PoolSet pools;
  pool::CarvingPoolOptions options;
  options.limit_bytes = 4 << 20;
  pools.Add(std::make_unique<pool::CarvingPool>(backend, Location::Host(), options, clock));
  broker::Broker broker{pools, broker::BrokerLimits{}, clock};
  const broker::SessionId session = *broker.StartSession({4000, 1000, 1000, {}}, "s");
  ASSERT_TRUE(broker.Create(session, broker::CreateParams{"full", 4 << 20, Location::Host()}).ok());
  auto wait = [&](FakeCall& call, broker::CreateParams params) {
    params.wait_for_seal = true;
    const std::string name = params.name;
    auto waiting = std::make_shared<WaitingOpen>(
        std::make_unique<BrokerOpener>(broker, session,
                                       OpenOrCreateWaitingForMemory{std::move(params)}),
        name, absl::Seconds(60), call, absl::Seconds(1));
    waiting->Start();
    return waiting;
  };

  // No room for a new name: past its memory wait, the numbers.
  FakeCall for_memory;
  auto late = wait(for_memory, broker::CreateParams{"late", 1 << 20, Location::Host()});
  ASSERT_EQ(late->state(), State::kWaiting);
  ASSERT_EQ(for_memory.memory_alarm_wait, absl::Seconds(1));
  ASSERT_EQ(for_memory.alarm_wait, absl::Seconds(60));
  for_memory.ring_memory();
  EXPECT_EQ(late->state(), State::kDone);
  ASSERT_EQ(for_memory.ended.size(), 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(for_memory.ended[0])) << for_memory.ended[0];
  EXPECT_THAT(std::string(for_memory.ended[0].message()),
              ::testing::StartsWith("no room for buffer 'late' (1 MiB) at host within 1s"));
  EXPECT_EQ(broker.Counts().waits, 0u) << "its watch was taken back";

  // The name exists unsealed: it waits for the seal, which the memory
  // alarm does not end; the call's own alarm does.
  FakeCall for_seal;
  auto sealing = wait(for_seal, broker::CreateParams{"full", 4 << 20, Location::Host()});
  ASSERT_EQ(sealing->state(), State::kWaiting);
  for_seal.ring_memory();
  EXPECT_EQ(sealing->state(), State::kWaiting);
  EXPECT_TRUE(for_seal.ended.empty());
  for_seal.ring();
  ASSERT_EQ(for_seal.ended.size(), 1u);
  EXPECT_THAT(std::string(for_seal.ended[0].message()), ::testing::HasSubstr("not sealed"));
}

}  // namespace
}  // namespace memd::service
