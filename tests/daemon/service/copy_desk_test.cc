// CopyDesk: a session's copies below gRPC, over a real broker (fake
// backend, host memory) and a real engine without GPUs.

#include "daemon/service/copy_desk.h"

#include <cstring>
#include <memory>
#include <string>

#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::service {
namespace {

using ::memd::test::Peer;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kBytes = 3 * kMiB + 5;

class CopyDeskTest : public ::testing::Test {
 protected:
  CopyDeskTest() {
    pool::CarvingPoolOptions options;
    options.limit_bytes = 64 * kMiB;
    pools_.Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(), options,
                                                   clock_));
    broker_ = std::make_unique<broker::Broker>(pools_, broker::BrokerLimits{}, clock_);
    auto engine = transfer::Engine::Start({}, transfer::EngineOptions{});
    EXPECT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    desk_ = std::make_unique<CopyDesk>(*broker_, engine_.get());
    alice_ = Start(1000);
  }

  broker::SessionId Start(uid_t uid) {
    auto session = broker_->StartSession(Peer(uid), "test");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  broker::LeaseId Create(broker::SessionId session, const std::string& name) {
    auto grant = broker_->Create(session, broker::CreateParams{name, kBytes, Location::Host(),
                                                               0600});
    EXPECT_TRUE(grant.ok()) << grant.status();
    return grant.ok() ? grant->lease : 0;
  }

  // Where the daemon reaches a leased buffer's bytes.
  std::byte* Bytes(broker::SessionId session, broker::LeaseId source,
                   broker::LeaseId destination, bool of_source) {
    auto ends = broker_->ResolveCopy(session, {source, 0, kBytes}, {destination, 0, kBytes});
    EXPECT_TRUE(ends.ok()) << ends.status();
    if (!ends.ok()) return nullptr;
    return of_source ? ends->source.memory.host : ends->destination.memory.host;
  }

  CopyOrder Order(broker::LeaseId source, broker::LeaseId destination) const {
    return CopyOrder{.source = {source, 0, kBytes}, .destination = {destination, 0, kBytes}};
  }

  test::FakeBackend backend_;
  test::FakeClock clock_;
  pool::PoolSet pools_;
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<transfer::Engine> engine_;
  std::unique_ptr<CopyDesk> desk_;
  broker::SessionId alice_ = 0;
};

TEST_F(CopyDeskTest, ACopyArrivesAndOnlyItsSessionSeesIt) {
  const broker::LeaseId source = Create(alice_, "src");
  const broker::LeaseId destination = Create(alice_, "dst");
  std::byte* from = Bytes(alice_, source, destination, true);
  std::byte* to = Bytes(alice_, source, destination, false);
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  for (std::uint64_t i = 0; i < kBytes; ++i) from[i] = static_cast<std::byte>(i * 7 + 3);

  auto id = desk_->Submit(alice_, 1000, Order(source, destination));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(test::PollUntil([&] {
    auto progress = desk_->Progress(alice_, *id);
    return progress.ok() && progress->terminal();
  }));
  auto progress = desk_->Progress(alice_, *id);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->state, transfer::TransferState::kDone) << progress->status;
  EXPECT_EQ(std::memcmp(from, to, kBytes), 0);

  // Another session asks after alice's transfer id: it does not exist there.
  const broker::SessionId bob = Start(1001);
  EXPECT_EQ(desk_->Progress(bob, *id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(desk_->Cancel(bob, *id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CopyDeskTest, AnEndedSessionsCopiesAreRefused) {
  const broker::LeaseId source = Create(alice_, "src");
  const broker::LeaseId destination = Create(alice_, "dst");
  desk_->EndSession(alice_, absl::Seconds(5));
  auto id = desk_->Submit(alice_, 1000, Order(source, destination));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnauthenticated) << id.status();
  // The broker forgot the session, and its leases with it.
  EXPECT_EQ(broker_->Sessions(alice_).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(CopyDeskTest, WithoutAnEngineEveryCopyCallIsUnavailable) {
  CopyDesk desk(*broker_, nullptr);
  const broker::LeaseId source = Create(alice_, "src");
  const broker::LeaseId destination = Create(alice_, "dst");
  auto id = desk.Submit(alice_, 1000, Order(source, destination));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(id.status().message(), HasSubstr("no transfer engine"));
  EXPECT_EQ(desk.Progress(alice_, 1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(desk.Cancel(alice_, 1).status().code(), absl::StatusCode::kUnavailable);
  // A refusal passes through as it was.
  const absl::Status refusal = absl::FailedPreconditionError("not sealed");
  EXPECT_EQ(desk.WithWritingTransfers(alice_, refusal), refusal);
  // The session still ends (in the broker).
  desk.EndSession(alice_, absl::Seconds(1));
  EXPECT_EQ(broker_->Sessions(alice_).status().code(), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace memd::service
