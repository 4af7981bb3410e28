// A Client after its daemon restarted: it connects again by itself while a
// Buffer holds a lease, and asks the new daemon for the leases its old
// session held (Reclaim). The client's half runs against a stand-in daemon
// that serves Reclaim (fake_memd.h); against the real memd, which does not
// serve it yet, a Client must go on as before: its old leases ended.

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/fake_memd.h"
#include "tests/client/pattern.h"
#include "tests/client/reclaim_steps.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// ---- The client's half, against the stand-in ----

class ReclaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = test::FakeMemd::Start(dir_.path());
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = std::move(*fake);
    auto client = Client::Connect({.socket_dir = dir_.path()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  Buffer Create(const std::string& name, std::uint32_t seed) {
    auto buffer = client_->Create(name, 4096);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return Buffer();
    test::FillPattern(buffer->mutable_data(), seed);
    return std::move(*buffer);
  }

  // Waits until the stand-in's session `session` holds `buffer`'s lease.
  bool HeldBy(const Buffer& buffer, std::uint64_t session) {
    return test::PollUntil([&] { return fake_->holder(buffer.lease_id()) == session; });
  }

  test::TempDir dir_;
  std::unique_ptr<test::FakeMemd> fake_;
  std::unique_ptr<Client> client_;
};

TEST_F(ReclaimTest, AfterAHangUpTheClientReclaimsByItselfAndReclaimedLeasesGoOn) {
  Buffer kept = Create("kept", 1);
  Buffer refused = Create("refused", 2);
  Buffer released = Create("released", 3);
  const std::uint64_t first = client_->session_id();
  fake_->Refuse(refused.lease_id());
  fake_->HangUp();

  // No call of the test's: the client connects again (session 2) by itself.
  ASSERT_TRUE(HeldBy(kept, 2));
  EXPECT_EQ(fake_->holder(released.lease_id()), 2u);
  EXPECT_EQ(fake_->holder(refused.lease_id()), first);
  auto reclaims = fake_->reclaims();
  ASSERT_EQ(reclaims.size(), 1u);
  EXPECT_EQ(reclaims[0].previous_token(), test::FakeMemd::Token(first));
  EXPECT_THAT(reclaims[0].lease_ids(),
              UnorderedElementsAreArray(
                  {kept.lease_id(), refused.lease_id(), released.lease_id()}));
  EXPECT_EQ(client_->session_id(), 2u);

  // Reclaimed: the same ids, on the new session.
  EXPECT_TRUE(kept.Seal().ok());
  EXPECT_TRUE(test::MatchesPattern(kept.data(), 1));
  EXPECT_TRUE(released.Release().ok());
  // Refused: ended with the old session, as without a Reclaim; its mapping
  // stays all the same.
  absl::Status seal = refused.Seal();
  EXPECT_EQ(seal.code(), absl::StatusCode::kNotFound) << seal;
  EXPECT_THAT(std::string(seal.message()), HasSubstr("ended with its session"));
  EXPECT_TRUE(test::MatchesPattern(refused.data(), 2));
  EXPECT_TRUE(refused.Release().ok());  // Nothing to tell the daemon.

  using Call = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_THAT(fake_->sealed(), ::testing::ElementsAre(Call{kept.lease_id(), 2}));
  EXPECT_THAT(fake_->released(), ::testing::ElementsAre(Call{released.lease_id(), 2}));
}

TEST_F(ReclaimTest, ReclaimAsksForAtMost256LeasesACall) {
  std::vector<Buffer> buffers;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 300; ++i) {
    buffers.push_back(Create(absl::StrCat("b/", i), i));
    ids.push_back(buffers.back().lease_id());
  }
  fake_->HangUp();
  ASSERT_TRUE(test::PollUntil([&] { return fake_->reclaims().size() == 2; }));
  auto reclaims = fake_->reclaims();
  std::vector<std::uint64_t> asked;
  for (const auto& reclaim : reclaims) {
    EXPECT_LE(reclaim.lease_ids_size(), 256);
    EXPECT_EQ(reclaim.previous_token(), test::FakeMemd::Token(1));
    asked.insert(asked.end(), reclaim.lease_ids().begin(), reclaim.lease_ids().end());
  }
  EXPECT_THAT(asked, UnorderedElementsAreArray(ids));
  for (const Buffer& buffer : buffers) EXPECT_EQ(fake_->holder(buffer.lease_id()), 2u);
  EXPECT_TRUE(buffers.front().Seal().ok());
  EXPECT_TRUE(buffers.back().Seal().ok());
}

// UNIMPLEMENTED is what a memd without Reclaim answers.
TEST_F(ReclaimTest, AFailedReclaimEndsTheOldLeasesAndNotTheCallThatReconnected) {
  fake_->FailReclaim(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Reclaim here"));
  Buffer buffer = Create("draft", 5);
  fake_->HangUp();
  // Whether this call or the client's own thread connects again, it has by
  // the time the call answers, and the reclaim was tried once.
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_EQ(fake_->reclaims().size(), 1u);
  absl::Status seal = buffer.Seal();
  EXPECT_EQ(seal.code(), absl::StatusCode::kNotFound) << seal;
  EXPECT_THAT(std::string(seal.message()), HasSubstr("ended with its session"));
  EXPECT_TRUE(test::MatchesPattern(buffer.data(), 5));
  EXPECT_TRUE(buffer.Release().ok());
  EXPECT_TRUE(fake_->released().empty());
}

TEST_F(ReclaimTest, LeasesFollowTheClientThroughTwoRestarts) {
  Buffer buffer = Create("draft", 6);
  fake_->HangUp();
  ASSERT_TRUE(HeldBy(buffer, 2));
  fake_->HangUp();
  ASSERT_TRUE(HeldBy(buffer, 3));
  auto reclaims = fake_->reclaims();
  ASSERT_EQ(reclaims.size(), 2u);
  EXPECT_EQ(reclaims[0].previous_token(), test::FakeMemd::Token(1));
  EXPECT_EQ(reclaims[1].previous_token(), test::FakeMemd::Token(2));
  EXPECT_TRUE(buffer.Seal().ok());
}

// The Buffer keeps the client's core, and with it the thread that watches.
TEST_F(ReclaimTest, ABufferThatOutlivesItsClientIsReclaimedToo) {
  Buffer buffer = Create("draft", 7);
  client_.reset();
  fake_->HangUp();
  ASSERT_TRUE(HeldBy(buffer, 2));
  EXPECT_TRUE(buffer.Seal().ok());
  EXPECT_TRUE(buffer.Release().ok());  // The last owner: the core goes here.
}

// While the daemon is away the client retries; its last owner's going ends
// that (a hang here is the failure).
TEST_F(ReclaimTest, AClientGoesWhileItsDaemonIsAway) {
  Buffer buffer = Create("draft", 8);
  fake_->HangUp();
  fake_.reset();
  client_.reset();
  EXPECT_TRUE(buffer.Release().ok());
}

// ---- Against memd itself ----

// memd as a child process that keeps nothing across a kill (DaemonProcess
// closes what memd stores), on a socket directory that outlives it.
class RestartReclaimTest : public ::testing::Test {
 protected:
  std::unique_ptr<test::DaemonProcess> StartMemd() {
    auto daemon = test::DaemonProcess::Start({"--socket-dir", dir_.path()});
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    return daemon.ok() ? std::move(*daemon) : nullptr;
  }

  std::unique_ptr<Client> Connect() {
    auto client = Client::Connect({.socket_dir = dir_.path()});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  test::TempDir dir_;
};

TEST_F(RestartReclaimTest, AClientHoldingALeaseConnectsAgainByItselfAfterAKill) {
  auto daemon = StartMemd();
  ASSERT_NE(daemon, nullptr);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto wip = client->Create("wip", 4096);
  ASSERT_TRUE(wip.ok()) << wip.status();
  test::FillPattern(wip->mutable_data(), 4);
  ASSERT_EQ(daemon->Stop(SIGKILL), 128 + SIGKILL);
  daemon = StartMemd();
  ASSERT_NE(daemon, nullptr);

  // No call on `client`: its session shows up beside the observer's.
  auto observer = Connect();
  ASSERT_NE(observer, nullptr);
  std::vector<SessionInfo> sessions;
  ASSERT_TRUE(test::PollUntil([&] {
    auto listed = observer->Sessions();
    if (listed.ok()) sessions = *listed;
    return sessions.size() == 2;
  }));
  const std::uint64_t session = client->session_id();
  EXPECT_NE(session, observer->session_id());
  EXPECT_TRUE(std::any_of(sessions.begin(), sessions.end(),
                          [&](const SessionInfo& s) { return s.id == session; }));

  // This memd kept nothing, so the lease ended with the old session.
  EXPECT_TRUE(test::MatchesPattern(wip->data(), 4));
  absl::Status seal = wip->Seal();
  EXPECT_EQ(seal.code(), absl::StatusCode::kNotFound) << seal;
  EXPECT_THAT(std::string(seal.message()), HasSubstr("ended with its session"));
  EXPECT_TRUE(wip->Release().ok());
  EXPECT_TRUE(client->Create("next", 4096).ok());
}

TEST(DurableReclaimTest, AWriterKilledUnderReclaimsAndSealsItsBuffer) {
  test::WriterReclaimsAndSeals("host", {"--backend", "host"});
}

// The same with a device buffer: the lease comes back on a CUDA VMM segment
// the new memd adopted (the fake driver; RealGpuTest has the real one's
// adoption).
TEST(DurableReclaimTest, AWriterOfADeviceBufferReclaimsItsLeaseOnTheFakeDriver) {
  ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
  auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
  ASSERT_TRUE(driver.ok()) << driver.status();
  test::WriterReclaimsAndSeals("device:0",
                         {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH},
                         driver->get());
}

}  // namespace
}  // namespace memd
