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

// Issue 29: 100MB was refused while 1M meant MiB.
TEST(ParseBytesTest, ReadsSiUnitsAsPowersOf1000AndIecAndShortFormsAs1024) {
  EXPECT_EQ(*ParseBytes("100MB"), 100'000'000u);
  EXPECT_EQ(*ParseBytes("1kB"), 1000u);
  EXPECT_EQ(*ParseBytes("1 KB"), 1000u);
  EXPECT_EQ(*ParseBytes("1.5 GB"), 1'500'000'000u);
  EXPECT_EQ(*ParseBytes("2TB"), 2'000'000'000'000u);
  EXPECT_EQ(*ParseBytes("0.3 kB"), 300u);
  EXPECT_EQ(*ParseBytes("1 mb"), 1'000'000u);  // Any case: bytes, never bits.
  EXPECT_EQ(*ParseBytes("1 KIB"), 1024u);
  EXPECT_EQ(*ParseBytes("1M"), std::uint64_t{1} << 20);  // As it always meant.
  EXPECT_EQ(*ParseBytes("3 t"), std::uint64_t{3} << 40);
  EXPECT_EQ(*ParseBytes("7 B"), 7u);
  for (const char* text : {"1 MiBs", "1 iB", "1 kk", "1 PB", "1 kbit", "0.5 kB5"}) {
    EXPECT_FALSE(ParseBytes(text).ok()) << text;
  }
  EXPECT_NE(ParseBytes("1 PB").status().message().find("kB MB GB TB = 1000^n"),
            std::string::npos)
      << ParseBytes("1 PB").status();
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
