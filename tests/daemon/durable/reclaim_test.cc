// Re-claiming leases after memd restarts (issue 23, docs/design.md
// "Durability"): a session's leases are recorded with a digest of its
// token, and after kill -9, an upgrade or a crash during the grace period,
// a new session of the same uid that presents the old token holds them
// again under the same ids. Raw sessions, as a client that is not libmemd:
// libmemd's own re-claim is tested in tests/client/.

#include <signal.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using test::RawSession;

constexpr std::uint64_t kBytes = 64 * 1024;

class ReclaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = test::ServiceManager::Create({.fd_store_max = 256});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    socket_dir_ = dir_.Join("run");
  }

  void StartMemd(int grace_seconds = 3600) {
    ASSERT_TRUE(manager_
                    ->Start(test::BinDir() + "/memd",
                            {"--socket-dir", socket_dir_, "--backend", "host",
                             "--metrics-address", "", "--recovery-grace-seconds",
                             std::to_string(grace_seconds)})
                    .ok());
    const absl::Status ready = manager_->WaitReady();
    ASSERT_TRUE(ready.ok()) << ready;
  }

  // A buffer being written: created unsealed in `session`, `text` written
  // into its mapping. Returns the lease id.
  std::uint64_t CreateWriting(const RawSession& session, const std::string& name,
                              const std::string& text) {
    v1::CreateRequest request;
    request.set_name(name);
    request.set_size_bytes(kBytes);
    v1::Lease lease;
    const grpc::Status created = session.Call(&v1::Memd::Stub::Create, request, &lease);
    EXPECT_TRUE(created.ok()) << created.error_message();
    auto fd = session.TakeFd(lease.handle().fd_seq());
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return 0;
    // The buffer is at `offset` in the segment, `mapped_bytes` of it.
    void* map = ::mmap(nullptr, lease.handle().mapped_bytes(), PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd->get(), static_cast<off_t>(lease.handle().offset()));
    EXPECT_NE(map, MAP_FAILED);
    if (map == MAP_FAILED) return 0;
    std::memcpy(map, text.data(), text.size());
    ::munmap(map, lease.handle().mapped_bytes());
    return lease.lease_id();
  }

  v1::ReclaimReply Reclaim(const RawSession& session, const std::string& token,
                           const std::vector<std::uint64_t>& leases) {
    v1::ReclaimRequest request;
    request.set_previous_token(token);
    for (std::uint64_t lease : leases) request.add_lease_ids(lease);
    v1::ReclaimReply reply;
    const grpc::Status status = session.Call(&v1::Memd::Stub::Reclaim, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    return reply;
  }

  std::vector<int> RefusalCodes(const v1::ReclaimReply& reply) {
    std::vector<int> codes;
    for (const v1::LeaseRefusal& refused : reply.refused()) codes.push_back(refused.code());
    return codes;
  }

  grpc::Status Seal(const RawSession& session, std::uint64_t lease) {
    v1::SealRequest request;
    request.set_lease_id(lease);
    v1::SealReply reply;
    return session.Call(&v1::Memd::Stub::Seal, request, &reply);
  }

  // What NAME holds now, read by a client of its own.
  std::string Contents(const std::string& name, std::size_t bytes) {
    auto client = test::ConnectOrFail(socket_dir_);
    if (client == nullptr) return "";
    auto buffer = client->Open(name);
    if (!buffer.ok()) return buffer.status().ToString();
    return std::string(reinterpret_cast<const char*>(buffer->data().data()), bytes);
  }

  test::TempDir dir_;
  std::string socket_dir_;
  std::unique_ptr<test::ServiceManager> manager_;
};

TEST_F(ReclaimTest, AWriterReclaimsItsLeaseAfterKillNineAndFinishesTheBuffer) {
  StartMemd();
  RawSession writer = RawSession::Open(socket_dir_);
  const std::uint64_t lease = CreateWriting(writer, "wip", "half of it");
  ASSERT_NE(lease, 0u);
  test::KillWithSigkill(*manager_);
  StartMemd();
  // The writer comes back: a new session, the old token.
  RawSession again = RawSession::Open(socket_dir_);
  const v1::ReclaimReply reply = Reclaim(again, writer.token, {lease});
  EXPECT_THAT(reply.reclaimed(), ElementsAre(lease));
  EXPECT_THAT(reply.refused(), IsEmpty());
  // The same lease id, writable, in the new session.
  const grpc::Status sealed = Seal(again, lease);
  ASSERT_TRUE(sealed.ok()) << sealed.error_message();
  EXPECT_EQ(Contents("wip", 10), "half of it");
}

TEST_F(ReclaimTest, AForgedOrSpentClaimGetsNothing) {
  StartMemd();
  RawSession writer = RawSession::Open(socket_dir_);
  const std::uint64_t lease = CreateWriting(writer, "wip", "x");
  RawSession other = RawSession::Open(socket_dir_);
  const std::uint64_t others = CreateWriting(other, "theirs", "y");
  test::KillWithSigkill(*manager_);
  StartMemd();
  RawSession again = RawSession::Open(socket_dir_);
  // Another session's token, a made-up one, one of this memd's own, ids
  // never held: all NOT_FOUND alike, and nothing moves.
  v1::ReclaimReply reply = Reclaim(again, other.token, {lease});
  EXPECT_THAT(RefusalCodes(reply), ElementsAre(static_cast<int>(absl::StatusCode::kNotFound)));
  reply = Reclaim(again, std::string(32, 'f'), {lease, others});
  EXPECT_THAT(reply.reclaimed(), IsEmpty());
  EXPECT_EQ(reply.refused_size(), 2);
  reply = Reclaim(again, again.token, {lease});
  EXPECT_THAT(reply.reclaimed(), IsEmpty());
  reply = Reclaim(again, writer.token, {lease + 1, others});
  EXPECT_THAT(reply.reclaimed(), IsEmpty());
  // The right claim, once.
  reply = Reclaim(again, writer.token, {lease});
  EXPECT_THAT(reply.reclaimed(), ElementsAre(lease));
  RawSession third = RawSession::Open(socket_dir_);
  reply = Reclaim(third, writer.token, {lease});
  EXPECT_THAT(reply.reclaimed(), IsEmpty());
  // A token past any memd's.
  v1::ReclaimRequest huge;
  huge.set_previous_token(std::string(1 << 20, 'a'));
  huge.add_lease_ids(lease);
  v1::ReclaimReply ignored;
  EXPECT_EQ(again.Call(&v1::Memd::Stub::Reclaim, huge, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ReclaimTest, LeasesStayReclaimableThroughAnUpgradeAndACrashDuringTheGracePeriod) {
  StartMemd();
  RawSession writer = RawSession::Open(socket_dir_);
  const std::uint64_t lease = CreateWriting(writer, "wip", "kept");
  // An upgrade in place, then a crash of the upgraded memd before anyone
  // re-claimed: the lease is still the old session's to take.
  const std::size_t statuses = manager_->Current().statuses.size();
  ASSERT_TRUE(manager_->Kill(SIGUSR2).ok());
  ASSERT_TRUE(manager_->WaitFor([&](const test::ServiceManager::Snapshot& now) {
    return now.statuses.size() > statuses;
  }));
  test::KillWithSigkill(*manager_);
  StartMemd();
  RawSession again = RawSession::Open(socket_dir_);
  const v1::ReclaimReply reply = Reclaim(again, writer.token, {lease});
  EXPECT_THAT(reply.reclaimed(), ElementsAre(lease));
  ASSERT_TRUE(Seal(again, lease).ok());
  // Re-claimed, the lease is the new session's: recorded as such, it
  // survives another crash under the new session's token.
  test::KillWithSigkill(*manager_);
  StartMemd();
  RawSession fourth = RawSession::Open(socket_dir_);
  EXPECT_THAT(Reclaim(fourth, writer.token, {lease}).reclaimed(), IsEmpty());
  EXPECT_THAT(Reclaim(fourth, again.token, {lease}).reclaimed(), ElementsAre(lease));
  EXPECT_EQ(Contents("wip", 4), "kept");
}

TEST_F(ReclaimTest, AReleasedLeaseOrAnEndedSessionLeavesNothingToReclaim) {
  StartMemd();
  RawSession writer = RawSession::Open(socket_dir_);
  const std::uint64_t released = CreateWriting(writer, "a", "a");
  const std::uint64_t kept = CreateWriting(writer, "b", "b");
  ASSERT_TRUE(Seal(writer, released).ok());
  ASSERT_TRUE(Seal(writer, kept).ok());
  v1::ReleaseRequest release;
  release.set_lease_id(released);
  v1::ReleaseReply ignored;
  ASSERT_TRUE(writer.Call(&v1::Memd::Stub::Release, release, &ignored).ok());
  // A session that ended on its own before the crash: its leases ended.
  std::string ended_token;
  std::uint64_t ended_lease = 0;
  {
    RawSession gone = RawSession::Open(socket_dir_);
    ended_token = gone.token;
    ended_lease = CreateWriting(gone, "c", "c");
    ASSERT_TRUE(Seal(gone, ended_lease).ok());
  }
  auto client = test::ConnectOrFail(socket_dir_);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(test::PollUntil([&] {
    auto sessions = client->Sessions();
    return sessions.ok() && sessions->size() == 2;  // The writer and this client.
  }));
  client.reset();
  test::KillWithSigkill(*manager_);
  StartMemd();
  RawSession again = RawSession::Open(socket_dir_);
  EXPECT_THAT(Reclaim(again, writer.token, {released, kept}).reclaimed(), ElementsAre(kept));
  EXPECT_THAT(Reclaim(again, ended_token, {ended_lease}).reclaimed(), IsEmpty());
}

TEST_F(ReclaimTest, AnUnclaimedUnsealedBufferGoesWhenTheGracePeriodEnds) {
  StartMemd();
  RawSession writer = RawSession::Open(socket_dir_);
  const std::uint64_t lease = CreateWriting(writer, "wip", "lost");
  test::KillWithSigkill(*manager_);
  StartMemd(/*grace_seconds=*/1);
  auto client = test::ConnectOrFail(socket_dir_);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(test::PollUntil([&] { return client->Stat("wip").status().code() ==
                                           absl::StatusCode::kNotFound; }));
  RawSession late = RawSession::Open(socket_dir_);
  EXPECT_THAT(Reclaim(late, writer.token, {lease}).reclaimed(), IsEmpty());
}

}  // namespace
}  // namespace memd
