#include "daemon/pool/segment_space.h"

#include "gtest/gtest.h"

namespace memd::pool {
namespace {

class SegmentSpaceTest : public ::testing::Test {
 protected:
  PoolSegment* NewSegment(std::uint64_t size) {
    segments_.push_back(std::make_unique<PoolSegment>(nullptr, size, false,
                                                      segments_.size() + 1));
    space_.Add(segments_.back().get());
    return segments_.back().get();
  }
  std::vector<std::unique_ptr<PoolSegment>> segments_;
  SegmentSpace space_;
};

TEST_F(SegmentSpaceTest, TakesTheSmallestBlockThatFits) {
  PoolSegment* big = NewSegment(100);
  PoolSegment* small = NewSegment(40);
  auto placement = space_.Take(30);
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->segment, small);
  EXPECT_EQ(placement->offset, 0u);
  EXPECT_EQ(space_.free_bytes(), 110u);
  EXPECT_EQ(space_.largest_free(), 100u);
  auto next = space_.Take(11);  // 10 bytes left in `small`: too few.
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->segment, big);
  EXPECT_FALSE(space_.Take(101).has_value());
}

TEST_F(SegmentSpaceTest, TiesGoToTheOldestSegmentAndLowestOffset) {
  PoolSegment* first = NewSegment(64);
  NewSegment(64);
  auto a = space_.Take(64);
  EXPECT_EQ(a->segment, first);
  space_.Give(first, 0, 64);
  auto b = space_.Take(16);
  EXPECT_EQ(b->segment, first);
  EXPECT_EQ(b->offset, 0u);
}

TEST_F(SegmentSpaceTest, SplitsAndMergesWithBothNeighbours) {
  PoolSegment* segment = NewSegment(300);
  auto a = space_.Take(100);
  auto b = space_.Take(100);
  auto c = space_.Take(100);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(b->offset, 100u);
  EXPECT_EQ(space_.free_bytes(), 0u);
  space_.Give(segment, a->offset, 100);
  space_.Give(segment, c->offset, 100);
  EXPECT_EQ(space_.largest_free(), 100u);
  EXPECT_EQ(segment->blocks.size(), 3u);
  space_.Give(segment, b->offset, 100);  // Joins both sides.
  EXPECT_EQ(segment->blocks.size(), 1u);
  EXPECT_TRUE(SegmentSpace::AllFree(*segment));
  EXPECT_EQ(space_.largest_free(), 300u);
  space_.Remove(segment);
  EXPECT_EQ(space_.free_bytes(), 0u);
  EXPECT_FALSE(space_.Take(1).has_value());
}

TEST_F(SegmentSpaceTest, MergesWithTheFollowingBlockOnly) {
  PoolSegment* segment = NewSegment(200);
  auto a = space_.Take(50);
  auto b = space_.Take(50);  // 100 left free after it.
  space_.Give(segment, b->offset, 50);
  EXPECT_EQ(segment->blocks.size(), 2u);  // a used, one free run of 150.
  EXPECT_EQ(space_.largest_free(), 150u);
  space_.Give(segment, a->offset, 50);
  EXPECT_TRUE(SegmentSpace::AllFree(*segment));
}

}  // namespace
}  // namespace memd::pool
