#include "common/bytes.h"

#include "gtest/gtest.h"

namespace memd {
namespace {

TEST(FormatBytesTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(std::uint64_t{1} << 20), "1 MiB");
  EXPECT_EQ(FormatBytes(std::uint64_t{64} << 30), "64 GiB");
}

TEST(ParseBytesTest, ReadsPlainNumbersAndUnits) {
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("64KiB"), 65536u);
  EXPECT_EQ(*ParseBytes("1.5 GiB"), std::uint64_t{3} << 29);
  EXPECT_EQ(*ParseBytes("2G"), std::uint64_t{2} << 30);
  EXPECT_EQ(*ParseBytes(" 1m "), std::uint64_t{1} << 20);
}

TEST(ParseBytesTest, RejectsTextThatIsNotASize) {
  for (const char* text : {"", "KiB", "12 parsecs", "-5", "1.2.3", "0.5"}) {
    EXPECT_FALSE(ParseBytes(text).ok()) << text;
  }
}

TEST(ParseBytesTest, RejectsSizesBeyond64Bits) {
  EXPECT_EQ(ParseBytes("20000000 TiB").status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(AlignUpTest, RoundsToMultiplesAndReportsOverflowAsZero) {
  EXPECT_EQ(AlignUp(1, 4096), 4096u);
  EXPECT_EQ(AlignUp(4096, 4096), 4096u);
  EXPECT_EQ(AlignUp(4097, 4096), 8192u);
  EXPECT_EQ(AlignUp(~std::uint64_t{0} - 5, 4096), 0u);
}

}  // namespace
}  // namespace memd
