// Finding 6 (issue 9): the limits were global only. One uid took every
// session, filled max_buffers with 1-byte buffers and could keep about a
// million opens waiting. Each is now also bounded per uid (and waiting opens
// daemon-wide): the attacker is refused with the numbers while other users
// go on.

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/held_attack.h"
#include "tests/security/open_daemon.h"
#include "tests/support/poll_until.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::HeldAttack;
using ::memd::test::kAlice;
using ::memd::test::kBob;
using ::memd::test::kMallory;
using ::memd::test::ProgramResult;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class PerUidLimitsTest : public test::OpenDaemonTest {};

TEST_F(PerUidLimitsTest, OneUidCannotTakeEverySession) {
  config_.max_sessions = 64;
  config_.max_sessions_per_uid = 8;
  StartDaemon();
  HeldAttack attack(kMallory, config_.socket_dir, {"fill_sessions"}, Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("sessions 8\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 holds 8 sessions; the "
                                "limit is 8 (max_sessions_per_uid)"));

  ProgramResult alice = Hostile(kAlice, {"start_session"});
  EXPECT_EQ(alice.exit_code, 0) << Describe(alice);
  EXPECT_EQ(alice.out, "ok\n");
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

TEST_F(PerUidLimitsTest, OneUidCannotFillTheBufferTable) {
  config_.max_buffers = 64;
  config_.max_buffers_per_uid = 16;
  StartDaemon();
  ProgramResult mallory = Hostile(kMallory, {"fill_buffers", "junk", "1", "1000"});
  ASSERT_EQ(mallory.exit_code, 0) << Describe(mallory);
  EXPECT_THAT(mallory.out, StartsWith("buffers 16\n"));
  EXPECT_THAT(mallory.out, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 owns 16 buffers; the "
                                     "limit is 16 (max_buffers_per_uid)"));

  // The attacker's buffers stay (they are sealed and persistent); others
  // still have room.
  ProgramResult alice = Hostile(kAlice, {"publish_text", "alice/a", "mine", "600"});
  EXPECT_EQ(alice.out, "published\n") << Describe(alice);
}

TEST_F(PerUidLimitsTest, OneUidCannotHoldUnboundedLeases) {
  config_.max_leases_per_session = 16;
  config_.max_leases_per_uid = 40;
  StartDaemon();
  HeldAttack attack(kMallory, config_.socket_dir, {"fill_leases", "junk/leased", "4"},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("leases 40\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 holds 40 leases; the "
                                "limit is 40 (max_leases_per_uid)"));

  ProgramResult published = Hostile(kAlice, {"publish_text", "alice/a", "mine", "600"});
  EXPECT_EQ(published.out, "published\n") << Describe(published);
  ProgramResult read = Hostile(kAlice, {"read_text", "alice/a", "0"});
  EXPECT_EQ(read.out, "read: mine\n") << Describe(read);
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

TEST_F(PerUidLimitsTest, OneUidCannotKeepUnboundedOpensWaiting) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 20;
  StartDaemon();
  // Four sessions of eight waits: each session within its own limit, the
  // uid over its.
  HeldAttack attack(kMallory, config_.socket_dir, {"fill_waits", "4", "8", "12"},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("waiting 20\nrefused 12\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 has 20 calls waiting (Open, "
                                "Create, WaitTransfer); the limit is 20 (max_waits_per_uid)"));

  // Alice's open may still wait: it runs out of time instead of being
  // refused.
  ProgramResult alice = Hostile(kAlice, {"read_text", "alice/never", "200"});
  EXPECT_THAT(alice.out, StartsWith("DEADLINE_EXCEEDED")) << Describe(alice);
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

// Issue 26: creates that wait for memory count among the same waits.
TEST_F(PerUidLimitsTest, OneUidCannotKeepUnboundedCreatesWaitingForMemory) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 20;
  config_.host_pool_limit_bytes = 4 << 20;
  StartDaemon();
  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  auto full = (*root)->Create("root/fills-the-host", 4 << 20);
  ASSERT_TRUE(full.ok()) << full.status();
  HeldAttack attack(kMallory, config_.socket_dir, {"fill_memory_waits", "4", "8", "12"},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("waiting 20\nrefused 12\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 has 20 calls waiting (Open, "
                                "Create, WaitTransfer); the limit is 20 (max_waits_per_uid)"));
  // Another user's create may still wait: its wait runs out instead.
  auto waited = (*root)->Create("root/more", 1 << 20,
                                {.wait_for_memory = absl::Milliseconds(200)});
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_THAT(std::string(waited.status().message()), HasSubstr("20 MiB asked by calls"));
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

// Copies that wait for memory (an open at a full location) count among the
// same waits, and take nothing from a create that waits with them.
TEST_F(PerUidLimitsTest, OneUidCannotKeepUnboundedCopiesWaitingForMemory) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 20;
  config_.host_pool_limit_bytes = 4 << 20;
  StartDaemon();
  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  auto source = (*root)->Create("shared/copy-source", 1 << 20,
                                {.location = "pinned", .mode = 0644});
  ASSERT_TRUE(source.ok() && source->Seal().ok()) << source.status();
  auto full = (*root)->Create("root/fills-the-host", 4 << 20);
  ASSERT_TRUE(full.ok()) << full.status();
  HeldAttack attack(kMallory, config_.socket_dir, {"fill_copy_waits", "4", "8", "12"},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("waiting 20\nrefused 12\n"));
  EXPECT_THAT(report, HasSubstr("(max_waits_per_uid)"));
  // Root's create, queued behind Mallory's twenty, still gets its turn when
  // room comes: uids take turns, whoever asked first and most.
  absl::StatusOr<Buffer> waited = absl::UnknownError("not yet");
  std::thread waiter([&] {
    waited = (*root)->Create("root/next", 1 << 20, {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] {
    auto stats = (*root)->Stats();
    return stats.ok() && !stats->memory_waits.empty() && stats->memory_waits[0].calls == 21;
  }));
  ASSERT_TRUE((*root)->Unlink("root/fills-the-host").ok());
  full = absl::UnknownError("released");  // Its last lease: 4 MiB free.
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

TEST_F(PerUidLimitsTest, WaitingOpensAreBoundedDaemonWide) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 16;
  config_.max_waits = 24;
  StartDaemon();
  // One call over each session's limit: its refusal says the other eight
  // wait.
  HeldAttack mallory(kMallory, config_.socket_dir, {"fill_waits", "2", "9", "2"},
                     Gate("mallory"));
  EXPECT_THAT(mallory.Report(), StartsWith("waiting 16\nrefused 2\n"));
  HeldAttack bob(kBob, config_.socket_dir, {"fill_waits", "2", "8", "8"}, Gate("bob"));
  const std::string report = bob.Report();
  EXPECT_THAT(report, StartsWith("waiting 8\nrefused 8\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: 24 calls are waiting (Open, Create, "
                                "WaitTransfer); the limit is 24 (max_waits)"));
  // The daemon-wide bound is what keeps the daemon's memory bounded
  // whatever the number of uids: once reached it refuses everyone.
  ProgramResult alice = Hostile(kAlice, {"read_text", "alice/never", "200"});
  EXPECT_THAT(alice.out, HasSubstr("(max_waits)")) << Describe(alice);
  EXPECT_EQ(mallory.Release().exit_code, 0) << Describe(mallory.Release());
  EXPECT_EQ(bob.Release().exit_code, 0) << Describe(bob.Release());
}

}  // namespace
}  // namespace memd
