// OpaqueIds: ids that are unique and never 0 without a table, and that do
// not count up, so that a client's own ids say nothing of others' activity.

#include "common/opaque_ids.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "gtest/gtest.h"

namespace memd {
namespace {

constexpr std::array<std::uint32_t, 4> kKey{1, 2, 3, 4};

TEST(OpaqueIdsTest, AMillionIdsAreDistinctNonZeroAndBelowTwoToTheFiftyThree) {
  OpaqueIds ids(kKey);
  std::unordered_set<std::uint64_t> seen;
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint64_t id = ids.Next();
    ASSERT_NE(id, 0u);
    ASSERT_LT(id, std::uint64_t{1} << 53);
    ASSERT_TRUE(seen.insert(id).second) << "id " << id << " came twice, at " << i;
  }
}

TEST(OpaqueIdsTest, ThePermutationIsABijectionOfASmallRangeIntoItsCodomain) {
  // Distinct inputs give distinct outputs, all inside [0, 2^52).
  OpaqueIds ids(kKey);
  std::unordered_set<std::uint64_t> images;
  for (std::uint64_t counter = 0; counter < 1 << 16; ++counter) {
    const std::uint64_t image = ids.Permute(counter);
    ASSERT_LT(image, std::uint64_t{1} << OpaqueIds::kBits);
    images.insert(image);
  }
  EXPECT_EQ(images.size(), 1u << 16);
}

TEST(OpaqueIdsTest, ConsecutiveIdsNeitherCountUpNorStayClose) {
  OpaqueIds ids(kKey);
  std::vector<std::uint64_t> run;
  for (int i = 0; i < 64; ++i) run.push_back(ids.Next());
  EXPECT_FALSE(std::is_sorted(run.begin(), run.end()));
  int close = 0;
  for (std::size_t i = 1; i < run.size(); ++i) {
    const std::uint64_t gap = run[i] > run[i - 1] ? run[i] - run[i - 1] : run[i - 1] - run[i];
    if (gap < (std::uint64_t{1} << 32)) ++close;
  }
  EXPECT_LE(close, 1) << "consecutive ids lie within 2^32 of each other";
}

TEST(OpaqueIdsTest, SequencesWithRandomKeysDiffer) {
  OpaqueIds first;
  OpaqueIds second;
  std::vector<std::uint64_t> a, b;
  for (int i = 0; i < 8; ++i) {
    a.push_back(first.Next());
    b.push_back(second.Next());
  }
  EXPECT_NE(a, b) << "two daemons (or two restarts) would hand out the same ids";
}

}  // namespace
}  // namespace memd
