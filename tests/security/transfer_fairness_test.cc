// Issue 22, finding 3: turns on a lane went by waiting time per transfer,
// and critical copies before all others but for ageing, so 64 runnable
// critical copies of one uid made another uid's normal 64 MiB copy take
// 20.2 s instead of 0.96 s: it moved one chunk per ageing period. Critical
// copies now leave the others one turn of every four (and uids take turns
// within a class), so the victim's copy ends while most of the flood is
// still to come.
//
// Measured by progress, never by time: how many of the flood's copies
// (which finish in order per destination) finished while the victim's copy
// ran, against how many were left when it started.

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/held_attack.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::HeldAttack;
using ::memd::test::kAlice;
using ::memd::test::kMallory;
using ::memd::test::ProgramResult;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// The number after `label` in "label N" lines of `text`; -1 when absent.
long Figure(const std::string& text, const std::string& label) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    long value = 0;
    if (absl::ConsumePrefix(&line, label + " ") && absl::SimpleAtoi(line, &value)) return value;
  }
  return -1;
}

class TransferFairnessTest : public test::OpenDaemonTest {};

TEST_F(TransferFairnessTest, CriticalCopiesOfOneUidCannotStallAnotherUidsCopy) {
  config_.transfer_max_session_transfers = 1024;
  StartDaemon();
  // Alice's normal copy of 64 MiB, in 1 MiB chunks: 64 turns on the host
  // lane. Ready before the flood, made when the flood runs.
  HeldAttack alice(kAlice, config_.socket_dir,
                   {"copy_on_release", std::to_string(64 * kMiB), std::to_string(kMiB),
                    "normal"},
                   Gate("alice"));
  ASSERT_EQ(alice.Report(), "ready\n") << Describe(alice.Release());
  // Mallory's flood: 8 destinations, 64 critical copies of 32 MiB into each
  // (8 runnable at a time, 16 GiB in all, far more than the daemon moves
  // during alice's copy when the lane is shared as promised).
  HeldAttack mallory(kMallory, config_.socket_dir,
                     {"flood_copies", "8", "64", std::to_string(32 * kMiB), "critical"},
                     Gate("mallory"));
  const std::string flooding = mallory.Report();
  const long copies = Figure(flooding, "copies");
  const long before = Figure(flooding, "finished");
  ASSERT_EQ(copies, 512) << flooding << Describe(mallory.Release());
  ASSERT_GE(before, 0) << flooding;

  const ProgramResult& copied = alice.Release();
  EXPECT_EQ(copied.out, "normal done\n") << Describe(copied);
  const ProgramResult& flooded = mallory.Release();
  const long after = Figure(flooded.out, "finished");
  ASSERT_GE(after, before) << Describe(flooded);
  // Counted once alice's copy had ended: an upper bound on the flood's
  // progress during it.
  EXPECT_LT(after - before, (copies - before) / 2)
      << "alice's copy ended only after most of the flood: " << before << " of " << copies
      << " flood copies had finished when it started, " << after << " when it had ended";
}

}  // namespace
}  // namespace memd
