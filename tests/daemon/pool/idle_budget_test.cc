#include "daemon/pool/idle_budget.h"

#include <vector>

#include "gtest/gtest.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

IdleSegment Idle(std::uint64_t size, std::uint64_t seq) {
  return IdleSegment{nullptr, nullptr, size, seq};
}

TEST(IdleBudgetTest, WithinTheBudgetNothingIsScanned) {
  IdleBudget budget(0.08);
  budget.NoteIdle();
  // 16 MiB of demand allows 17.28 MiB.
  EXPECT_FALSE(budget.Check(16 * kMiB, 17 * kMiB).has_value());
}

TEST(IdleBudgetTest, BeyondTheBudgetTheExcessIsWhatToGiveBack) {
  IdleBudget budget(0.5);
  budget.NoteIdle();
  auto scan = budget.Check(8 * kMiB, 20 * kMiB);
  ASSERT_TRUE(scan.has_value());
  EXPECT_DOUBLE_EQ(scan->excess_bytes, 8.0 * kMiB);  // 20 - 1.5 x 8.
}

TEST(IdleBudgetTest, ANegativeBudgetKeepsEveryIdleSegment) {
  IdleBudget budget(-1);
  budget.NoteIdle();
  EXPECT_FALSE(budget.Check(kMiB, 1000 * kMiB).has_value());
}

TEST(IdleBudgetTest, ChoosesTheLargestFirstUntilTheExcessIsCovered) {
  bool all_taken = true;
  std::vector<IdleSegment> chosen = IdleBudget::Choose(
      {Idle(2 * kMiB, 1), Idle(8 * kMiB, 2), Idle(4 * kMiB, 3), Idle(8 * kMiB, 4)},
      10.0 * kMiB, &all_taken);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].seq, 2u);  // Ties: the oldest first.
  EXPECT_EQ(chosen[1].seq, 4u);
  EXPECT_FALSE(all_taken);
  chosen = IdleBudget::Choose({Idle(2 * kMiB, 1)}, 10.0 * kMiB, &all_taken);
  EXPECT_EQ(chosen.size(), 1u);
  EXPECT_TRUE(all_taken);
}

TEST(IdleBudgetTest, NoScanAgainUntilASegmentGoesIdle) {
  IdleBudget budget(0);
  budget.NoteIdle();
  auto scan = budget.Check(kMiB, 2 * kMiB);
  ASSERT_TRUE(scan.has_value());
  budget.Scanned(*scan, /*left_none_idle=*/true);
  EXPECT_FALSE(budget.Check(kMiB, 2 * kMiB).has_value());
  budget.NoteIdle();
  EXPECT_TRUE(budget.Check(kMiB, 2 * kMiB).has_value());
}

TEST(IdleBudgetTest, AScanThatLeftSegmentsIdleIsRepeated) {
  // Some were held elsewhere or not needed: letting go of them raises no
  // event, so the next growth must look again.
  IdleBudget budget(0);
  budget.NoteIdle();
  auto scan = budget.Check(kMiB, 2 * kMiB);
  ASSERT_TRUE(scan.has_value());
  budget.Scanned(*scan, /*left_none_idle=*/false);
  EXPECT_TRUE(budget.Check(kMiB, 2 * kMiB).has_value());
}

}  // namespace
}  // namespace memd::pool
