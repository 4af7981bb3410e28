#include "daemon/pool/size_classes.h"

#include "gtest/gtest.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kPage = 4096;

TEST(SizeClassesTest, PagesUpTo64KiBThenEightStepsPerDoubling) {
  SizeClasses classes(kPage, 1 << 20);
  ASSERT_GE(classes.count(), 16u);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(classes.bytes(i), (i + 1) * kPage);
  EXPECT_EQ(classes.bytes(16), 72u << 10);
  EXPECT_EQ(classes.bytes(23), 128u << 10);
  EXPECT_EQ(classes.max_bytes(), 1u << 20);
  EXPECT_EQ(classes.count(), 16u + 8u * 4u);  // 64K..128K..256K..512K..1M
}

TEST(SizeClassesTest, EveryClassIsAlignedAndIncreasing) {
  SizeClasses classes(kPage, 3 << 20);
  for (std::size_t i = 0; i < classes.count(); ++i) {
    EXPECT_EQ(classes.bytes(i) % kPage, 0u);
    if (i > 0) {
      EXPECT_GT(classes.bytes(i), classes.bytes(i - 1));
    }
  }
  EXPECT_EQ(classes.max_bytes(), 3u << 20);
}

TEST(SizeClassesTest, RoundingWastesAtMostAnEighthBeyond64KiB) {
  SizeClasses classes(kPage, 1 << 20);
  for (std::uint64_t size = kPage; size <= (1 << 20); size += kPage) {
    const std::size_t c = classes.ClassOf(size);
    ASSERT_LT(c, classes.count());
    const std::uint64_t block = classes.bytes(c);
    EXPECT_GE(block, size);
    if (c > 0) {
      EXPECT_LT(classes.bytes(c - 1), size);  // The smallest that fits.
    }
    if (size > (64 << 10)) {
      EXPECT_LE(block - size, block / 8) << size;
    }
    if (size <= (64 << 10)) {
      EXPECT_EQ(block, size);
    }
  }
}

TEST(SizeClassesTest, AlignmentLargerThanTheSmallLimitGivesOneClass) {
  SizeClasses classes(2 << 20, 1 << 20);  // A GPU's 2 MiB granularity.
  EXPECT_EQ(classes.count(), 1u);
  EXPECT_EQ(classes.bytes(0), 2u << 20);
  EXPECT_EQ(classes.ClassOf(1), 0u);
}

}  // namespace
}  // namespace memd::pool
