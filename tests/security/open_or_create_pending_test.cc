// While a Create or OpenOrCreate allocates for a name, the others that ask
// for that name wait for it instead of allocating a second buffer
// (creating_names.h). A hostile uid must not turn that into a lock: it
// cannot delay any other name, cannot keep a name "being created" past its
// own allocation call (dead session or not), and the waits its own calls
// make count against its uid only. At the broker, whose backend holds the
// hostile allocation in flight (GatedBackend): a real daemon has no way to
// hold one allocation and not the next without timing.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

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
constexpr uid_t kBob = 1001;
constexpr uid_t kMallory = 61003;

CreateParams Params(const std::string& name, std::uint64_t size = 4 * kMiB,
                    std::uint32_t mode = kDefaultMode) {
  CreateParams params;
  params.name = name;
  params.size = size;
  params.location = Location::Host();
  params.mode = mode;
  return params;
}

class OpenOrCreatePendingTest : public ::testing::Test {
 protected:
  explicit OpenOrCreatePendingTest(BrokerLimits limits = {}) {
    pool::CarvingPoolOptions options;
    options.limit_bytes = 64 * kMiB;
    pools_.Add(std::make_unique<pool::CarvingPool>(gate_, Location::Host(), options, clock_));
    broker_ = std::make_unique<Broker>(pools_, limits, clock_);
  }
  ~OpenOrCreatePendingTest() override {
    gate_.Open();
    if (held_.joinable()) held_.join();
  }

  SessionId Start(uid_t uid) {
    auto session = broker_->StartSession(Peer(uid), "client");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // `session`'s OpenOrCreate of `name`, its allocation held in the backend
  // until gate_.Open(); returns once held.
  void HoldCreate(SessionId session, const std::string& name,
                  std::uint32_t mode = kDefaultMode) {
    gate_.HoldNextReserve();
    held_ = std::thread([this, session, name, mode] {
      held_result_ = broker_->OpenOrCreate(session, Params(name, 4 * kMiB, mode),
                                           broker_->NewWatchId(), [] {});
    });
    gate_.AwaitHeld();
  }
  absl::StatusOr<std::optional<Grant>> LetGo() {
    gate_.Open();
    held_.join();
    return held_result_;
  }

  absl::StatusOr<std::optional<Grant>> OpenOrCreate(SessionId session, const std::string& name,
                                                    WatchId watch, std::atomic<int>* woken,
                                                    std::uint32_t mode = kDefaultMode) {
    return broker_->OpenOrCreate(session, Params(name, 4 * kMiB, mode), watch,
                                 [woken] { ++*woken; });
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  test::GatedBackend gate_{backend_};
  pool::PoolSet pools_;
  std::unique_ptr<Broker> broker_;
  std::thread held_;
  absl::StatusOr<std::optional<Grant>> held_result_ = absl::UnknownError("not run");
};

TEST_F(OpenOrCreatePendingTest, ACreateInFlightDelaysNoOtherName) {
  SessionId mallory = Start(kMallory);
  SessionId alice = Start(kAlice);
  HoldCreate(mallory, "mallory/slow");
  // Alice's names are served at once, by both calls, while Mallory's
  // allocation runs.
  std::atomic<int> woken = 0;
  auto model = OpenOrCreate(alice, "alice/model", broker_->NewWatchId(), &woken);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->has_value());
  EXPECT_TRUE((*model)->created);
  auto data = broker_->Create(alice, Params("alice/data"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(broker_->CountsOf(kAlice).waits, 0u);
  ASSERT_TRUE(LetGo().ok());
  EXPECT_EQ(woken, 0);
}

TEST_F(OpenOrCreatePendingTest, ACreatorsDeadSessionLeavesTheNameToTheNextCaller) {
  SessionId mallory = Start(kMallory);
  SessionId alice = Start(kAlice);
  HoldCreate(mallory, "shared/model", 0644);
  std::atomic<int> woken = 0;
  const WatchId watch = broker_->NewWatchId();
  auto waiting = OpenOrCreate(alice, "shared/model", watch, &woken, 0644);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_FALSE(waiting->has_value());
  // Mallory goes away while her allocation runs: the name is hers only
  // until that call returns.
  broker_->EndSession(mallory);
  EXPECT_EQ(LetGo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(woken, 1);
  auto mine = OpenOrCreate(alice, "shared/model", watch, &woken, 0644);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(mine->has_value());
  EXPECT_TRUE((*mine)->created);
  EXPECT_EQ((*mine)->buffer.owner_uid, kAlice);
  EXPECT_EQ(broker_->CountsOf(kMallory).buffers, 0u);
}

class OpenOrCreatePendingLimitsTest : public OpenOrCreatePendingTest {
 protected:
  static BrokerLimits Limits() {
    BrokerLimits limits;
    limits.max_waits_per_uid = 2;
    return limits;
  }
  OpenOrCreatePendingLimitsTest() : OpenOrCreatePendingTest(Limits()) {}
};

TEST_F(OpenOrCreatePendingLimitsTest, WaitsOnACreateInFlightCountAgainstTheWaitersOwnUid) {
  SessionId alice = Start(kAlice);
  SessionId mallory = Start(kMallory);
  SessionId bob = Start(kBob);
  HoldCreate(alice, "alice/model", 0644);
  std::atomic<int> mallory_woken = 0;
  for (int i = 0; i < 2; ++i) {
    auto waiting = OpenOrCreate(mallory, "alice/model", broker_->NewWatchId(), &mallory_woken,
                                0644);
    ASSERT_TRUE(waiting.ok()) << waiting.status();
    EXPECT_FALSE(waiting->has_value());
  }
  // Mallory's third wait is refused, with her own uid's limit; Bob's waits
  // as if Mallory were not there.
  auto refused = OpenOrCreate(mallory, "alice/model", broker_->NewWatchId(), &mallory_woken,
                              0644);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("max_waits_per_uid"));
  std::atomic<int> bob_woken = 0;
  const WatchId bob_watch = broker_->NewWatchId();
  auto bobs = OpenOrCreate(bob, "alice/model", bob_watch, &bob_woken, 0644);
  ASSERT_TRUE(bobs.ok()) << bobs.status();
  EXPECT_FALSE(bobs->has_value());

  auto created = LetGo();
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(broker_->Seal(alice, (*created)->lease).ok());
  EXPECT_EQ(bob_woken, 1);
  auto opened = OpenOrCreate(bob, "alice/model", bob_watch, &bob_woken, 0644);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(opened->has_value());
  EXPECT_EQ((*opened)->buffer.owner_uid, kAlice);
}

}  // namespace
}  // namespace memd::broker
