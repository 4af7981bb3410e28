// Issue 22, finding 4: WaitTransfer calls were bounded per session only. One
// uid with 130 sessions held 33,280 waiting WaitTransfer calls (about 16 KB
// of daemon memory each) while Stats said no call waited. They now count
// with waiting opens toward max_waits_per_uid and max_waits, and show in
// Stats' waits.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/held_attack.h"
#include "tests/security/slow_copies.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using test::Describe;
using test::HeldAttack;
using test::kAlice;
using test::kBob;
using test::kMallory;
using test::kMiB;
using test::ProgramResult;

class TransferWaitsTest : public test::SlowCopyDaemonTest {};

TEST_F(TransferWaitsTest, OneUidCannotKeepUnboundedTransferWaitsAndTheyShowAsWaits) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 20;
  StartSlowDaemon();
  // Four sessions of eight waits on a copy of their own (32 MiB: seconds on
  // the slow link): each session within its limit, the uid over its.
  HeldAttack attack(kMallory, config_.socket_dir,
                    {"fill_transfer_waits", "4", "8", "12", std::to_string(32 * kMiB)},
                    Gate("gate"));
  const std::string report = attack.Report();
  EXPECT_THAT(report, StartsWith("waiting 20\nrefused 12\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: uid 61003 has 20 calls waiting (Open, "
                                "Create, WaitTransfer); the limit is 20 (max_waits_per_uid)"));
  EXPECT_EQ(Stats(Session()).waits(), 20u) << "the daemon says what waits in it";

  // Alice's open may still wait: it runs out of time instead of being
  // refused.
  ProgramResult alice = Hostile(kAlice, {"read_text", "alice/never", "200"});
  EXPECT_THAT(alice.out, StartsWith("DEADLINE_EXCEEDED")) << Describe(alice);
  EXPECT_EQ(attack.Release().exit_code, 0) << Describe(attack.Release());
}

TEST_F(TransferWaitsTest, TransferWaitsAndWaitingOpensShareTheDaemonWideBound) {
  config_.max_waits_per_session = 8;
  config_.max_waits_per_uid = 16;
  config_.max_waits = 24;
  StartSlowDaemon();
  HeldAttack mallory(kMallory, config_.socket_dir,
                     {"fill_transfer_waits", "2", "9", "2", std::to_string(32 * kMiB)},
                     Gate("mallory"));
  EXPECT_THAT(mallory.Report(), StartsWith("waiting 16\nrefused 2\n"));
  // Bob's waiting opens find only what is left of the daemon's bound.
  HeldAttack bob(kBob, config_.socket_dir, {"fill_waits", "2", "8", "8"}, Gate("bob"));
  const std::string report = bob.Report();
  EXPECT_THAT(report, StartsWith("waiting 8\nrefused 8\n"));
  EXPECT_THAT(report, HasSubstr("RESOURCE_EXHAUSTED: 24 calls are waiting (Open, "
                                "Create, WaitTransfer); the limit is 24 (max_waits)"));
  EXPECT_EQ(Stats(Session()).waits(), 24u);
  EXPECT_EQ(mallory.Release().exit_code, 0) << Describe(mallory.Release());
  EXPECT_EQ(bob.Release().exit_code, 0) << Describe(bob.Release());
}

}  // namespace
}  // namespace memd
