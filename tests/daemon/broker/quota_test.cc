#include "daemon/broker/quota.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(QuotaTest, EmptyOrZeroMeansNone) {
  for (const char* text : {"", "  ", "0"}) {
    auto quota = Quota::Parse(text);
    ASSERT_TRUE(quota.ok()) << text << ": " << quota.status();
    EXPECT_TRUE(quota->empty()) << text;
    EXPECT_EQ(quota->For(Location::Host()), 0u) << text;
    EXPECT_EQ(quota->For(Location::Device(3)), 0u) << text;
  }
}

TEST(QuotaTest, ASizeAloneHoldsInEveryLocation) {
  auto quota = Quota::Parse("16GiB");
  ASSERT_TRUE(quota.ok()) << quota.status();
  EXPECT_FALSE(quota->empty());
  EXPECT_EQ(quota->For(Location::Host()), 16 * kGiB);
  EXPECT_EQ(quota->For(Location::Pinned()), 16 * kGiB);
  EXPECT_EQ(quota->For(Location::Device(0)), 16 * kGiB);
  EXPECT_EQ(Quota::Parse("4096")->For(Location::Host()), 4096u);
}

TEST(QuotaTest, LocationsNameTheirOwnAndOneGpuWinsOverAll) {
  auto quota = Quota::Parse(" host=16GiB, device=40GiB ,device:1=8GiB");
  ASSERT_TRUE(quota.ok()) << quota.status();
  EXPECT_EQ(quota->For(Location::Host()), 16 * kGiB);
  EXPECT_EQ(quota->For(Location::Pinned()), 0u) << "not named: no quota";
  EXPECT_EQ(quota->For(Location::Device(0)), 40 * kGiB);
  EXPECT_EQ(quota->For(Location::Device(1)), 8 * kGiB);
  EXPECT_EQ(quota->For(Location::Device(2)), 40 * kGiB);
  // 0 for one GPU lifts the quota there.
  EXPECT_EQ(Quota::Parse("device=1GiB,device:2=0")->For(Location::Device(2)), 0u);
  EXPECT_EQ(Quota::Parse("pinned=2GiB")->For(Location::Pinned()), 2 * kGiB);
}

TEST(QuotaTest, BadTextIsInvalidArgumentNamingThePart) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& bad : {Case{"lots", "quota 'lots'"},
                          Case{"gpu=1GiB", "unknown location 'gpu'"},
                          Case{"host=1GiB,pinned", "'pinned' is not LOCATION=SIZE"},
                          Case{"host=many", "host:"},
                          Case{"device:x=1GiB", "unknown location 'device:x'"},
                          Case{"host=1GiB,,", "'' is not LOCATION=SIZE"}}) {
    auto quota = Quota::Parse(bad.text);
    ASSERT_FALSE(quota.ok()) << bad.text;
    EXPECT_EQ(quota.status().code(), absl::StatusCode::kInvalidArgument) << bad.text;
    EXPECT_THAT(quota.status().message(), HasSubstr(bad.says)) << bad.text;
  }
}

}  // namespace
}  // namespace memd::broker
