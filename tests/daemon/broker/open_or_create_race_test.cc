// Callers of one name that arrive together while it does not exist yet (N
// workers loading one model cold: memd.safetensors.load, OpenOrCreate): one
// of them allocates, the others wait for it and open its buffer. Before,
// each allocated a whole buffer while the broker's mutex was released, and
// where two did not fit the location, all but one failed RESOURCE_EXHAUSTED
// instead of opening the winner's. The backend holds the first caller's
// allocation in flight (GatedBackend), so the others arrive while it runs,
// every time.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "daemon/broker/broker.h"
#include "daemon/pool/carving_pool.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/gated_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr uid_t kAlice = 1000;
// Two of these do not fit the pool's limit.
constexpr std::uint64_t kBuffer = 5 * kMiB;
constexpr std::uint64_t kLimit = 8 * kMiB;

CreateParams Params(const std::string& name) {
  CreateParams params;
  params.name = name;
  params.size = kBuffer;
  params.location = Location::Device(0);
  return params;
}

// An open's wake, counted: what the service's waiting call would be told.
struct Wake {
  WatchId watch = 0;
  std::shared_ptr<std::atomic<int>> runs = std::make_shared<std::atomic<int>>(0);
  std::function<void()> callback() const {
    return [runs = runs] { ++*runs; };
  }
};

class OpenOrCreateRaceTest : public ::testing::Test {
 protected:
  OpenOrCreateRaceTest() {
    pool::CarvingPoolOptions options;
    options.limit_bytes = kLimit;
    options.idle_budget = -1;  // Keep what is freed: reuse shows.
    pools_.Add(std::make_unique<pool::CarvingPool>(gate_, Location::Device(0), options,
                                                   clock_));
    broker_ = std::make_unique<Broker>(pools_, BrokerLimits{}, clock_);
  }
  ~OpenOrCreateRaceTest() override {
    gate_.Open();  // A failed expectation must not leave the creator held.
    if (creator_.joinable()) creator_.join();
  }

  SessionId Start() {
    auto session = broker_->StartSession(Peer(kAlice), "worker");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  Wake NewWake() { return Wake{broker_->NewWatchId()}; }

  absl::StatusOr<std::optional<Grant>> Try(SessionId session, const Wake& wake,
                                           const std::string& name = "model") {
    return broker_->OpenOrCreate(session, Params(name), wake.watch, wake.callback());
  }

  // `session`'s OpenOrCreate of `name` on a thread of its own, its
  // allocation held in the backend until gate_.Open(); returns once held.
  void StartHeldCreator(SessionId session, const std::string& name = "model") {
    gate_.HoldNextReserve();
    creator_ = std::thread([this, session, name] {
      created_ = broker_->OpenOrCreate(session, Params(name), broker_->NewWatchId(), [] {});
    });
    gate_.AwaitHeld();
  }
  absl::StatusOr<std::optional<Grant>> FinishCreator() {
    gate_.Open();
    creator_.join();
    return created_;
  }

  // Until `calls` calls wait in the broker (a call that holds its thread
  // registers its wait before it blocks), or the caller has answered
  // without waiting: then the test goes on to say what it answered.
  void AwaitWaits(std::uint64_t calls, const std::atomic<bool>& answered) {
    while (broker_->Counts().waits < calls && !answered) std::this_thread::yield();
  }

  pool::PoolStats Stats() const { return pools_.Stats()[0]; }

  // A call without a wake, on a thread of its own, that must wait for the
  // create in flight: returned once the broker counts it waiting, checked
  // not answered yet. The test joins `thread` before reading `result`.
  template <typename Result>
  struct Blocked {
    Result result = absl::UnknownError("not run");
    std::atomic<bool> answered = false;
    std::thread thread;
  };
  template <typename Result>
  std::unique_ptr<Blocked<Result>> CallBlocked(std::function<Result()> call) {
    auto blocked = std::make_unique<Blocked<Result>>();
    blocked->thread = std::thread([slot = blocked.get(), call] {
      slot->result = call();
      slot->answered = true;
    });
    AwaitWaits(1, blocked->answered);
    EXPECT_FALSE(blocked->answered)
        << "answered while the other allocated: " << blocked->result.status();
    return blocked;
  }
  std::unique_ptr<Blocked<absl::StatusOr<std::optional<Grant>>>> OpenOrCreateBlocked(
      SessionId session) {
    return CallBlocked<absl::StatusOr<std::optional<Grant>>>(
        [this, session] { return broker_->OpenOrCreate(session, Params("model"), 0, nullptr); });
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  test::GatedBackend gate_{backend_};
  pool::PoolSet pools_;
  std::unique_ptr<Broker> broker_;
  std::thread creator_;
  absl::StatusOr<std::optional<Grant>> created_ = absl::UnknownError("not run");
};

TEST_F(OpenOrCreateRaceTest, ColdCallersOfOneNameAllocateOneBufferAndAllOpenIt) {
  constexpr int kWorkers = 4;
  std::vector<SessionId> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(Start());
  StartHeldCreator(workers[0]);

  // The others come while the first allocates: none allocates, each waits.
  std::vector<Wake> wakes;
  for (int i = 1; i < kWorkers; ++i) {
    wakes.push_back(NewWake());
    auto early = Try(workers[i], wakes.back());
    ASSERT_TRUE(early.ok()) << "worker " << i << ": " << early.status();
    EXPECT_FALSE(early->has_value()) << "worker " << i;
  }
  EXPECT_EQ(broker_->Counts().waits, kWorkers - 1u);
  for (const Wake& wake : wakes) EXPECT_EQ(*wake.runs, 0);

  auto created = FinishCreator();
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->has_value());
  EXPECT_TRUE((*created)->created);
  // The creator's end woke each of them once; they look again and find the
  // buffer being written: a wait for its seal, as if they had come after.
  for (std::size_t i = 0; i < wakes.size(); ++i) {
    EXPECT_EQ(*wakes[i].runs, 1) << "worker " << i + 1;
    auto again = Try(workers[i + 1], wakes[i]);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE(again->has_value());
  }
  ASSERT_TRUE(broker_->Seal(workers[0], (*created)->lease).ok());
  for (std::size_t i = 0; i < wakes.size(); ++i) {
    EXPECT_EQ(*wakes[i].runs, 2) << "worker " << i + 1;
    auto opened = Try(workers[i + 1], wakes[i]);
    ASSERT_TRUE(opened.ok()) << opened.status();
    ASSERT_TRUE(opened->has_value());
    EXPECT_FALSE((*opened)->created);
    EXPECT_EQ((*opened)->access, Access::kRead);
    EXPECT_EQ((*opened)->buffer.id, (*created)->buffer.id);
  }
  // One buffer's memory, reserved once: nothing went back to the pool.
  EXPECT_EQ(gate_.reserves(), 1);
  EXPECT_EQ(Stats().used_bytes, kBuffer);
  EXPECT_EQ(Stats().reserved_bytes, kBuffer);
  EXPECT_EQ(broker_->Counts().buffers, 1u);
  EXPECT_EQ(broker_->Counts().waits, 0u);
}

TEST_F(OpenOrCreateRaceTest, ACallerWithoutAWakeWaitsForTheCreatorThenAnswersAsAfterIt) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first);
  // Without a wake (no wait timeout) the call holds its thread meanwhile.
  auto caller = OpenOrCreateBlocked(second);
  auto created = FinishCreator();
  caller->thread.join();
  const absl::StatusOr<std::optional<Grant>>& answer = caller->result;
  ASSERT_TRUE(created.ok()) << created.status();
  // What it would have been told had it come just after: the buffer exists
  // and is being written.
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition) << answer.status();
  EXPECT_THAT(answer.status().message(), HasSubstr("not sealed"));
  EXPECT_EQ(gate_.reserves(), 1);
  EXPECT_EQ(Stats().used_bytes, kBuffer);
  EXPECT_EQ(broker_->Counts().waits, 0u);
}

TEST_F(OpenOrCreateRaceTest, ACallerWithoutAWakeWhoseSessionEndsIsAnsweredAtOnce) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first);
  auto caller = OpenOrCreateBlocked(second);
  // Its thread waits as a waiting call does: the session's end wakes it,
  // while the other allocation still runs.
  broker_->EndSession(second);
  caller->thread.join();
  EXPECT_EQ(caller->result.status().code(), absl::StatusCode::kUnauthenticated)
      << caller->result.status();
  EXPECT_EQ(broker_->Counts().waits, 0u);
  ASSERT_TRUE(FinishCreator().ok());
  EXPECT_EQ(gate_.reserves(), 1);
}

TEST_F(OpenOrCreateRaceTest, ACreateOfANameBeingCreatedWaitsAndIsAlreadyExists) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first);
  auto caller = CallBlocked<absl::StatusOr<Grant>>(
      [this, second] { return broker_->Create(second, Params("model")); });
  ASSERT_TRUE(FinishCreator().ok());
  caller->thread.join();
  const absl::StatusOr<Grant>& create = caller->result;
  // As documented: ALREADY_EXISTS, not RESOURCE_EXHAUSTED for a second
  // buffer that could not fit, and nothing allocated for it.
  EXPECT_EQ(create.status().code(), absl::StatusCode::kAlreadyExists) << create.status();
  EXPECT_EQ(gate_.reserves(), 1);
  EXPECT_EQ(Stats().used_bytes, kBuffer);
}

TEST_F(OpenOrCreateRaceTest, AnOpenOrCreateWaitsForACreateOfTheNameToo) {
  SessionId producer = Start();
  SessionId consumer = Start();
  gate_.HoldNextReserve();
  creator_ = std::thread([&] {
    auto grant = broker_->Create(producer, Params("model"));
    created_ = grant.ok() ? absl::StatusOr<std::optional<Grant>>(std::move(*grant))
                          : absl::StatusOr<std::optional<Grant>>(grant.status());
  });
  gate_.AwaitHeld();
  Wake wake = NewWake();
  auto early = Try(consumer, wake);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->has_value());
  ASSERT_TRUE(FinishCreator().ok());
  EXPECT_EQ(*wake.runs, 1);
  auto again = Try(consumer, wake);  // Waits for the producer's seal now.
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->has_value());
  EXPECT_EQ(gate_.reserves(), 1);
}

TEST_F(OpenOrCreateRaceTest, AnOpenOrCreateThatMayWaitForMemoryWaitsForTheCreatorInstead) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first);
  // Room for a second copy would be missing: it neither fails nor queues
  // for memory, it waits for the buffer being made.
  Wake wake = NewWake();
  auto early = broker_->OpenOrCreateOrWait(second, Params("model"), wake.watch, wake.callback());
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_FALSE(early->has_value());
  EXPECT_FALSE(broker_->WaitsForMemory(wake.watch));
  auto created = FinishCreator();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*wake.runs, 1);
  ASSERT_TRUE(broker_->Seal(first, (*created)->lease).ok());
  auto opened = broker_->OpenOrCreateOrWait(second, Params("model"), wake.watch, wake.callback());
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(opened->has_value());
  EXPECT_EQ((*opened)->buffer.id, (*created)->buffer.id);
  EXPECT_EQ(gate_.reserves(), 1);
}

TEST_F(OpenOrCreateRaceTest, WhenTheCreatorsAllocationFailsAWaiterCreatesInstead) {
  SessionId first = Start();
  SessionId second = Start();
  SessionId third = Start();
  // The held allocation fails in the backend once let go.
  backend_.FailNextReserve(absl::InternalError("injected backend failure"));
  StartHeldCreator(first);
  Wake second_wake = NewWake();
  Wake third_wake = NewWake();
  ASSERT_TRUE(Try(second, second_wake).ok());
  ASSERT_TRUE(Try(third, third_wake).ok());

  auto created = FinishCreator();
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInternal) << created.status();
  // Not the creator's error: each looks again, and the first to do so
  // creates (its own allocation, its own quotas), the next waits for it.
  EXPECT_EQ(*second_wake.runs, 1);
  EXPECT_EQ(*third_wake.runs, 1);
  auto second_try = Try(second, second_wake);
  ASSERT_TRUE(second_try.ok()) << second_try.status();
  ASSERT_TRUE(second_try->has_value());
  EXPECT_TRUE((*second_try)->created);
  auto third_try = Try(third, third_wake);
  ASSERT_TRUE(third_try.ok()) << third_try.status();
  EXPECT_FALSE(third_try->has_value());  // Waits for the seal.
  EXPECT_EQ(Stats().used_bytes, kBuffer);
  EXPECT_EQ(broker_->Counts().buffers, 1u);
}

TEST_F(OpenOrCreateRaceTest, WhenTheCreatorsSessionEndsAWaiterCreatesInstead) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first);
  Wake wake = NewWake();
  ASSERT_TRUE(Try(second, wake).ok());
  broker_->EndSession(first);  // While its allocation runs.
  EXPECT_EQ(*wake.runs, 0);    // Nothing to look at yet: the allocation runs.

  auto created = FinishCreator();
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnauthenticated) << created.status();
  EXPECT_EQ(*wake.runs, 1);
  auto retried = Try(second, wake);
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_TRUE(retried->has_value());
  EXPECT_TRUE((*retried)->created);
  // The dead creator's memory went back to the pool, and served the waiter.
  EXPECT_EQ(Stats().used_bytes, kBuffer);
  EXPECT_EQ(Stats().reserved_bytes, kBuffer);
  EXPECT_EQ(broker_->Counts().buffers, 1u);
}

TEST_F(OpenOrCreateRaceTest, AWaitersOwnEndOrCancelTakesItsWaitBack) {
  SessionId first = Start();
  SessionId leaving = Start();
  SessionId cancelling = Start();
  StartHeldCreator(first);
  Wake leaving_wake = NewWake();
  Wake cancelling_wake = NewWake();
  ASSERT_TRUE(Try(leaving, leaving_wake).ok());
  ASSERT_TRUE(Try(cancelling, cancelling_wake).ok());
  EXPECT_EQ(broker_->Counts().waits, 2u);

  broker_->EndSession(leaving);
  EXPECT_EQ(*leaving_wake.runs, 1);  // Woken at its end: its retry fails.
  EXPECT_EQ(Try(leaving, leaving_wake).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(broker_->CancelWatch(cancelling_wake.watch));
  EXPECT_EQ(broker_->Counts().waits, 0u);

  ASSERT_TRUE(FinishCreator().ok());
  EXPECT_EQ(*leaving_wake.runs, 1);
  EXPECT_EQ(*cancelling_wake.runs, 0);
}

TEST_F(OpenOrCreateRaceTest, OtherNamesDoNotWaitForACreateInFlight) {
  SessionId first = Start();
  SessionId second = Start();
  StartHeldCreator(first, "big");
  // Another name of the same location, small enough to fit beside it.
  CreateParams small = Params("small");
  small.size = kMiB;
  auto other = broker_->OpenOrCreate(second, small, broker_->NewWatchId(), [] {});
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(other->has_value());
  EXPECT_TRUE((*other)->created);
  ASSERT_TRUE(FinishCreator().ok());
}

}  // namespace
}  // namespace memd::broker
