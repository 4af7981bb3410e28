// Issue 22, finding 1: unfinished copies pinned memory outside every quota.
// A copy keeps the whole allocation of each buffer it touches; when that
// buffer's last lease went, its quota and buffer count came back at once
// while the memory stayed out of the pool until the copy ended, so a 1-byte
// copy queued behind a long one parked an allocation of any size. An
// attacker filled the host pool this way and another uid's create, well
// inside its quota, failed.
//
// Now such a buffer stays its owner's until its copies let go (quota,
// buffer count, usage), and a buffer freed while copies write it has those
// copies cancelled: nobody could read what they would write.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/held_attack.h"
#include "tests/security/slow_copies.h"
#include "tests/support/poll_until.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using test::Describe;
using test::HeldAttack;
using test::kAlice;
using test::kMallory;
using test::kMiB;
using test::PollUntil;
using test::ProgramResult;
using test::RawSession;

class ParkedMemoryTest : public test::SlowCopyDaemonTest {
 protected:
  // What `uid` holds in the host pool, as the root session sees it.
  static std::uint64_t HostBytesOf(const RawSession& root, uid_t uid) {
    v1::UsageReply usage;
    grpc::Status status = root.Call(&v1::Memd::Stub::Usage, v1::UsageRequest(), &usage);
    EXPECT_TRUE(status.ok()) << status.error_message();
    for (const v1::UidUsage& entry : usage.usage()) {
      if (entry.uid() == uid && entry.location() == "host") return entry.bytes();
    }
    return 0;
  }
};

TEST_F(ParkedMemoryTest, MemoryACopyKeepsAfterItsBufferWasFreedStaysChargedToItsOwner) {
  // Room for the attacker's quota and alice's buffer, not for eight parked
  // buffers and hers.
  config_.host_pool_limit_bytes = 352 * kMiB;
  config_.max_uid_bytes = "host=192MiB";
  StartSlowDaemon();
  // The chain's source (64 MiB) and four buffers of 32 MiB fill the quota.
  HeldAttack attack(kMallory, config_.socket_dir,
                    {"park_behind_chain", std::to_string(64 * kMiB),
                     std::to_string(32 * kMiB), "8"},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("parked 4\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: "));
  EXPECT_THAT(report, HasSubstr("(max_uid_bytes)"));

  RawSession root = Session();
  EXPECT_EQ(HostBytesOf(root, kMallory), 192 * kMiB) << "parked memory is its owner's";
  // Alice's 128 MiB fit beside what the attacker may hold.
  ProgramResult alice = Hostile(kAlice, {"fill_buffers", "alice/big", std::to_string(128 * kMiB), "1"});
  EXPECT_THAT(alice.out, StartsWith("buffers 1\n")) << Describe(alice);
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
  EXPECT_TRUE(PollUntil([&] { return HostBytesOf(root, kMallory) == 0; }))
      << "the attacker's memory goes back with its session and copies";
}

TEST_F(ParkedMemoryTest, ACopyIntoABufferFreedBehindAChainIsCancelledAndItsMemoryGoesBack) {
  StartSlowDaemon();
  RawSession session = Session();
  v1::Lease feed = Create(session, "chain/feed", 64 * kMiB);
  v1::Lease chain = Create(session, "chain/device", 64 * kMiB, "device:0");
  Copy(session, feed.lease_id(), chain.lease_id(), 64 * kMiB);
  // Reads the chain's first byte: queued behind it, for seconds.
  v1::Lease doomed = Create(session, "doomed", 32 * kMiB);
  const std::uint64_t queued = Copy(session, chain.lease_id(), doomed.lease_id(), 1);
  v1::ReleaseRequest release;
  release.set_lease_id(doomed.lease_id());
  v1::ReleaseReply released;
  ASSERT_TRUE(session.Call(&v1::Memd::Stub::Release, release, &released).ok());

  v1::WaitTransferRequest wait;
  wait.set_transfer_id(queued);
  wait.set_wait_ms(20000);
  v1::TransferProgress progress;
  ASSERT_TRUE(session.Call(&v1::Memd::Stub::WaitTransfer, wait, &progress).ok());
  EXPECT_EQ(progress.state(), v1::TRANSFER_CANCELLED) << progress.error_message();
  EXPECT_THAT(progress.error_message(), HasSubstr("its destination buffer was freed"));
  EXPECT_TRUE(PollUntil([&] { return HostBytesOf(session, 0) == 64 * kMiB; }))
      << "only the chain's source is left in the host pool";
}

}  // namespace
}  // namespace memd
