#include "daemon/broker/placement.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kKiB = std::uint64_t{1} << 10;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

PlacementCandidate Host(std::uint64_t free) { return {Location::Host(), free, 64 * kGiB}; }
PlacementCandidate Pinned(std::uint64_t free) { return {Location::Pinned(), free, 8 * kGiB}; }
PlacementCandidate Device(int ordinal, std::uint64_t free, std::uint64_t total = 16 * kGiB,
                          bool mappable = true) {
  return {Location::Device(ordinal), free, total, mappable};
}

// A node with room everywhere: host, pinned and one empty 16 GiB GPU.
std::vector<PlacementCandidate> Roomy() {
  return {Host(64 * kGiB), Pinned(8 * kGiB), Device(0, 16 * kGiB)};
}

// Where `size` with `hint` goes, or the error's text.
std::string Where(std::uint64_t size, const std::vector<PlacementCandidate>& candidates,
                  AccessHint hint = AccessHint::kNone, const PlacementRules& rules = {}) {
  absl::StatusOr<PlacementDecision> decision = Place({size, hint}, candidates, rules);
  if (!decision.ok()) return decision.status().ToString();
  return decision->location.ToString();
}

std::string Rule(std::uint64_t size, const std::vector<PlacementCandidate>& candidates,
                 AccessHint hint = AccessHint::kNone, const PlacementRules& rules = {}) {
  absl::StatusOr<PlacementDecision> decision = Place({size, hint}, candidates, rules);
  if (!decision.ok()) return decision.status().ToString();
  return decision->rule;
}

TEST(AccessHintTest, NamesReadBackAndEmptyIsNone) {
  for (AccessHint hint : {AccessHint::kNone, AccessHint::kDeviceFrequent,
                          AccessHint::kHostFrequent, AccessHint::kReadMostly,
                          AccessHint::kStreaming}) {
    auto parsed = ParseAccessHint(AccessHintName(hint));
    ASSERT_TRUE(parsed.ok()) << AccessHintName(hint) << ": " << parsed.status();
    EXPECT_EQ(*parsed, hint);
  }
  EXPECT_EQ(AccessHintName(AccessHint::kDeviceFrequent), "device_frequent");
  EXPECT_EQ(AccessHintName(AccessHint::kHostFrequent), "host_frequent");
  EXPECT_EQ(AccessHintName(AccessHint::kReadMostly), "read_mostly");
  EXPECT_EQ(AccessHintName(AccessHint::kStreaming), "streaming");
  EXPECT_EQ(*ParseAccessHint(""), AccessHint::kNone);
  EXPECT_EQ(*ParseAccessHint(" streaming "), AccessHint::kStreaming);
}

TEST(AccessHintTest, UnknownHintIsInvalidArgumentListingTheValidOnes) {
  auto parsed = ParseAccessHint("Streaming");
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "unknown access hint 'Streaming' (none, device_frequent, host_frequent, "
            "read_mostly or streaming)");
}

TEST(PlacementRulesTest, DefaultsAreUniversalComputesTableWithAQuarterHeadroom) {
  PlacementRules rules;
  EXPECT_EQ(rules.small, 64 * kKiB);
  EXPECT_EQ(rules.medium, 16 * kMiB);
  EXPECT_EQ(rules.headroom_percent, 25);
  auto parsed = PlacementRules::Parse("  ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->small, rules.small);
  EXPECT_EQ(parsed->medium, rules.medium);
  EXPECT_EQ(parsed->headroom_percent, rules.headroom_percent);
}

TEST(PlacementRulesTest, ParseTakesAnySubsetInAnyOrder) {
  auto rules = PlacementRules::Parse(" headroom = 10% , medium=1GiB,small= 1 MiB ");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->small, kMiB);
  EXPECT_EQ(rules->medium, kGiB);
  EXPECT_EQ(rules->headroom_percent, 10);

  rules = PlacementRules::Parse("small=32KiB");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->small, 32 * kKiB);
  EXPECT_EQ(rules->medium, 16 * kMiB) << "unnamed keys keep their defaults";
  EXPECT_EQ(rules->headroom_percent, 25);

  EXPECT_EQ(PlacementRules::Parse("headroom=0")->headroom_percent, 0);
  EXPECT_EQ(PlacementRules::Parse("headroom=99%")->headroom_percent, 99);
  EXPECT_EQ(PlacementRules::Parse("small=0")->small, 0u) << "nothing is small";
  auto equal = PlacementRules::Parse("small=1MiB,medium=1MiB");
  ASSERT_TRUE(equal.ok()) << equal.status();
  EXPECT_EQ(equal->medium, kMiB) << "no medium class";
}

TEST(PlacementRulesTest, EveryRefusalIsInvalidArgumentNamingThePart) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"small", "'small' is not KEY=VALUE (small=SIZE, medium=SIZE, headroom=N%)"},
           {"small=64KiB,,medium=1MiB", "'' is not KEY=VALUE"},
           {"small=lots", "small: cannot read 'lots' as a size"},
           {"medium=1.5B", "medium: size '1.5B' is not a whole number of bytes"},
           {"medium=99999999TiB", "medium: size '99999999TiB' is too large"},
           {"headroom=100%", "headroom '100%' is not a whole percentage from 0% to 99%"},
           {"headroom=-1%", "headroom '-1%' is not a whole percentage"},
           {"headroom=2.5%", "headroom '2.5%' is not a whole percentage"},
           {"headroom=quarter", "headroom 'quarter' is not a whole percentage"},
           {"headroom=", "headroom '' is not a whole percentage"},
           {"colour=blue", "unknown key 'colour' (small, medium or headroom)"},
           {"small=1KiB, small=2KiB", "small is given twice"},
           {"small=1MiB,medium=64KiB", "medium (64 KiB) is below small (1 MiB)"},
           {"medium=32KiB", "medium (32 KiB) is below small (64 KiB)"},
       }) {
    auto rules = PlacementRules::Parse(c.text);
    ASSERT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(rules.status().message(), HasSubstr(c.says)) << c.text;
    EXPECT_THAT(rules.status().message(), HasSubstr("placement '")) << c.text;
  }
}

TEST(PlaceTest, TheTableAtAndAroundEveryThreshold) {
  const auto node = Roomy();
  EXPECT_EQ(Where(1, node), "pinned");
  EXPECT_EQ(Where(64 * kKiB - 1, node), "pinned");
  EXPECT_EQ(Where(64 * kKiB, node), "device:0");
  EXPECT_EQ(Where(64 * kKiB + 1, node), "device:0");
  EXPECT_EQ(Where(16 * kMiB - 1, node), "device:0");
  EXPECT_EQ(Where(16 * kMiB, node), "device:0");
  EXPECT_EQ(Where(16 * kMiB + 1, node), "device:0") << "16 GiB free: fits comfortably";
  EXPECT_EQ(Where(12 * kGiB, node), "device:0") << "4 GiB (25%) stays free";
  EXPECT_EQ(Where(12 * kGiB + 1, node), "host") << "less than 25% would stay";

  EXPECT_EQ(Rule(64 * kKiB - 1, node), "65535 B (~64 KiB) is under 64 KiB: pinned")
      << "a size FormatBytes would round reads exactly";
  EXPECT_EQ(Rule(64 * kKiB, node),
            "64 KiB is in 64 KiB-16 MiB: device; device:0 has the most free (16 GiB of 16 GiB)");
  EXPECT_EQ(Rule(16 * kMiB, node),
            "16 MiB is in 64 KiB-16 MiB: device; device:0 has the most free (16 GiB of 16 GiB)");
}

TEST(PlaceTest, ThresholdsFollowTheRules) {
  auto rules = PlacementRules::Parse("small=1MiB,medium=2MiB,headroom=50%");
  ASSERT_TRUE(rules.ok()) << rules.status();
  const auto node = Roomy();
  EXPECT_EQ(Where(kMiB - 1, node, AccessHint::kNone, *rules), "pinned");
  EXPECT_EQ(Where(kMiB, node, AccessHint::kNone, *rules), "device:0");
  EXPECT_EQ(Where(8 * kGiB, node, AccessHint::kNone, *rules), "device:0");
  EXPECT_EQ(Where(8 * kGiB + 1, node, AccessHint::kNone, *rules), "host");
  EXPECT_EQ(Rule(8 * kGiB + 1, node, AccessHint::kNone, *rules),
            "8589934593 B (~8 GiB) is over 2 MiB: no device keeps 50% free after it (most: device:0, 16 GiB of "
            "16 GiB); so host");
}

TEST(PlaceTest, HeadroomBoundaryIsInclusive) {
  // 8 GiB of 16 GiB free: a 4 GiB buffer leaves exactly 25%.
  const std::vector<PlacementCandidate> node = {Host(64 * kGiB), Device(0, 8 * kGiB)};
  EXPECT_EQ(Where(4 * kGiB, node), "device:0");
  EXPECT_EQ(Where(4 * kGiB + 1, node), "host");
  EXPECT_EQ(Rule(4 * kGiB, node),
            "4 GiB is over 16 MiB: device; device:0 has the most free of the devices keeping 25% "
            "after it (8 GiB of 16 GiB, 25% after)");

  PlacementRules none;
  none.headroom_percent = 0;
  EXPECT_EQ(Where(8 * kGiB, node, AccessHint::kNone, none), "device:0") << "exactly full";
  EXPECT_EQ(Where(8 * kGiB + 1, node, AccessHint::kNone, none), "host");
}

TEST(PlaceTest, ComfortIsJudgedPerDeviceNotByMostFreeAlone) {
  // device:0 has more free bytes, but an 80 GiB card must keep 20 GiB.
  const std::vector<PlacementCandidate> node = {
      Host(64 * kGiB), Device(0, 21 * kGiB, 80 * kGiB), Device(1, 12 * kGiB, 16 * kGiB)};
  EXPECT_EQ(Where(2 * kGiB, node), "device:1");
  EXPECT_EQ(Rule(2 * kGiB, node),
            "2 GiB is over 16 MiB: device; device:1 has the most free of the devices keeping 25% "
            "after it (12 GiB of 16 GiB, 62% after)");
  EXPECT_EQ(Where(16 * kMiB, node), "device:0") << "medium: most free wins";
}

TEST(PlaceTest, SmallWithoutPinnedMemoryGoesToHost) {
  const std::vector<PlacementCandidate> node = {Host(64 * kGiB), Device(0, 16 * kGiB)};
  EXPECT_EQ(Where(4 * kKiB, node), "host");
  EXPECT_EQ(Rule(4 * kKiB, node), "4 KiB is under 64 KiB: no pinned memory here; so host");
  EXPECT_EQ(Where(4 * kKiB, node, AccessHint::kStreaming), "host");
}

TEST(PlaceTest, EachRuleFallsBackThroughEveryKind) {
  // Small: pinned full, host full, a device holds it.
  std::vector<PlacementCandidate> node = {Host(2 * kKiB), Pinned(kKiB), Device(0, kGiB)};
  EXPECT_EQ(Rule(4 * kKiB, node),
            "4 KiB is under 64 KiB: pinned has only 1 KiB free; host has only 2 KiB free; so "
            "device; device:0 has the most free (1 GiB of 16 GiB)");
  // Medium: no device holds it, host does.
  node = {Host(64 * kGiB), Pinned(8 * kGiB), Device(0, kMiB)};
  EXPECT_EQ(Rule(8 * kMiB, node),
            "8 MiB is in 64 KiB-16 MiB: no device has 8 MiB free (most: device:0, 1 MiB of 16 "
            "GiB); so host");
  // Medium: then pinned.
  node = {Host(kMiB), Pinned(8 * kGiB), Device(0, kMiB)};
  EXPECT_EQ(Where(8 * kMiB, node), "pinned");
  // Large: not comfortable anywhere, host and pinned full, a device still holds it.
  node = {Host(kMiB), Pinned(kMiB), Device(0, 2 * kGiB)};
  EXPECT_EQ(Rule(kGiB, node),
            "1 GiB is over 16 MiB: no device keeps 25% free after it (most: device:0, 2 GiB of "
            "16 GiB); host has only 1 MiB free; pinned has only 1 MiB free; so device; device:0 "
            "has the most free (2 GiB of 16 GiB)");
  // Large with no device at all.
  node = {Host(64 * kGiB)};
  EXPECT_EQ(Rule(kGiB, node), "1 GiB is over 16 MiB: no device here; so host");
}

TEST(PlaceTest, DeviceFrequentTakesADeviceAtAnySize) {
  const auto node = Roomy();
  EXPECT_EQ(Where(1, node, AccessHint::kDeviceFrequent), "device:0");
  EXPECT_EQ(Where(15 * kGiB, node, AccessHint::kDeviceFrequent), "device:0")
      << "no headroom asked";
  EXPECT_EQ(Rule(4 * kKiB, node, AccessHint::kDeviceFrequent),
            "4 KiB with hint device_frequent: device; device:0 has the most free (16 GiB of 16 "
            "GiB)");
  // A device that cannot hold it: pinned, then host.
  std::vector<PlacementCandidate> full = {Host(64 * kGiB), Pinned(8 * kGiB), Device(0, kMiB)};
  EXPECT_EQ(Where(2 * kMiB, full, AccessHint::kDeviceFrequent), "pinned");
  full = {Host(64 * kGiB), Device(0, kMiB)};
  EXPECT_EQ(Where(2 * kMiB, full, AccessHint::kDeviceFrequent), "host");
}

TEST(PlaceTest, HostFrequentTakesHostThenPinned) {
  const auto node = Roomy();
  EXPECT_EQ(Where(1, node, AccessHint::kHostFrequent), "host");
  EXPECT_EQ(Where(8 * kMiB, node, AccessHint::kHostFrequent), "host");
  EXPECT_EQ(Where(kGiB, node, AccessHint::kHostFrequent), "host");
  EXPECT_EQ(Rule(kGiB, node, AccessHint::kHostFrequent), "1 GiB with hint host_frequent: host");
  std::vector<PlacementCandidate> full = {Host(kMiB), Pinned(8 * kGiB), Device(0, 16 * kGiB)};
  EXPECT_EQ(Where(kGiB, full, AccessHint::kHostFrequent), "pinned");
  full = {Host(kMiB), Device(0, 16 * kGiB)};
  EXPECT_EQ(Where(kGiB, full, AccessHint::kHostFrequent), "device:0");
}

TEST(PlaceTest, ReadMostlyTakesADeviceOnlyWithHeadroom) {
  const auto node = Roomy();
  EXPECT_EQ(Where(4 * kKiB, node, AccessHint::kReadMostly), "device:0") << "even small";
  EXPECT_EQ(Where(12 * kGiB, node, AccessHint::kReadMostly), "device:0");
  EXPECT_EQ(Where(12 * kGiB + 1, node, AccessHint::kReadMostly), "host");
  // A tight device: host, even for a small buffer.
  const std::vector<PlacementCandidate> tight = {Host(64 * kGiB), Pinned(8 * kGiB),
                                                 Device(0, 4 * kGiB)};
  EXPECT_EQ(Rule(4 * kKiB, tight, AccessHint::kReadMostly),
            "4 KiB with hint read_mostly: no device keeps 25% free after it (most: device:0, 4 "
            "GiB of 16 GiB); so host");
}

TEST(PlaceTest, StreamingTakesPinned) {
  const auto node = Roomy();
  EXPECT_EQ(Where(1, node, AccessHint::kStreaming), "pinned");
  EXPECT_EQ(Where(kGiB, node, AccessHint::kStreaming), "pinned");
  EXPECT_EQ(Rule(kGiB, node, AccessHint::kStreaming), "1 GiB with hint streaming: pinned");
  const std::vector<PlacementCandidate> full = {Host(kMiB), Pinned(kMiB), Device(0, 16 * kGiB)};
  EXPECT_EQ(Where(2 * kMiB, full, AccessHint::kStreaming), "device:0");
}

TEST(PlaceTest, NeverChoosesWhatTheCallerCannotMap) {
  // device:0 is roomier but not visible to the caller.
  std::vector<PlacementCandidate> node = {Host(64 * kGiB), Device(0, 16 * kGiB, 16 * kGiB, false),
                                          Device(1, 8 * kGiB)};
  for (AccessHint hint : {AccessHint::kNone, AccessHint::kDeviceFrequent,
                          AccessHint::kReadMostly}) {
    EXPECT_EQ(Where(kMiB, node, hint), "device:1") << AccessHintName(hint);
  }
  EXPECT_EQ(Where(5 * kGiB, node), "host") << "device:1 would keep under 25%";
  // No device the caller can map at all.
  node = {Host(64 * kGiB), Device(0, 16 * kGiB, 16 * kGiB, false)};
  for (AccessHint hint : {AccessHint::kNone, AccessHint::kDeviceFrequent,
                          AccessHint::kReadMostly, AccessHint::kHostFrequent,
                          AccessHint::kStreaming}) {
    EXPECT_EQ(Where(kMiB, node, hint), "host") << AccessHintName(hint);
  }
  EXPECT_EQ(Rule(8 * kMiB, node),
            "8 MiB is in 64 KiB-16 MiB: no device this process can map; so host");
  // Pinned memory the caller cannot map.
  node = {Host(64 * kGiB), {Location::Pinned(), 8 * kGiB, 8 * kGiB, false}};
  EXPECT_EQ(Rule(4 * kKiB, node),
            "4 KiB is under 64 KiB: pinned cannot be mapped by this process; so host");
  // Only an unmappable place has room: that is exhaustion, not a placement.
  node = {Host(kKiB), Device(0, 16 * kGiB, 16 * kGiB, false)};
  auto decision = Place({kMiB, AccessHint::kNone}, node, {});
  EXPECT_EQ(decision.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(PlaceTest, MostFreeDeviceWinsAndTiesGoToTheLowestOrdinal) {
  std::vector<PlacementCandidate> node = {Host(64 * kGiB), Device(0, 4 * kGiB),
                                          Device(1, 12 * kGiB), Device(2, 8 * kGiB)};
  EXPECT_EQ(Where(8 * kMiB, node), "device:1");
  EXPECT_EQ(Rule(8 * kMiB, node),
            "8 MiB is in 64 KiB-16 MiB: device; device:1 has the most free (12 GiB of 16 GiB)");
  node = {Host(64 * kGiB), Device(3, 8 * kGiB), Device(2, 8 * kGiB), Device(1, 4 * kGiB)};
  EXPECT_EQ(Where(8 * kMiB, node), "device:2");
  EXPECT_EQ(Where(kGiB, node), "device:2");
  EXPECT_EQ(Where(4 * kKiB, node, AccessHint::kDeviceFrequent), "device:2");
}

TEST(PlaceTest, NothingHoldsItIsResourceExhaustedWithTheSizes) {
  const std::vector<PlacementCandidate> node = {Host(512 * kMiB), Pinned(0), Device(0, 256 * kMiB),
                                                Device(1, 16 * kGiB, 16 * kGiB, false)};
  for (AccessHint hint : {AccessHint::kNone, AccessHint::kDeviceFrequent,
                          AccessHint::kHostFrequent, AccessHint::kReadMostly,
                          AccessHint::kStreaming}) {
    auto decision = Place({kGiB, hint}, node, {});
    ASSERT_EQ(decision.status().code(), absl::StatusCode::kResourceExhausted)
        << AccessHintName(hint);
    EXPECT_EQ(decision.status().message(),
              "no location can hold 1 GiB: host has 512 MiB free, pinned has 0 B free, device:0 "
              "has 256 MiB free");
  }
  EXPECT_EQ(Where(512 * kMiB, node), "host") << "exactly full still holds";
}

TEST(PlaceTest, BadRequestsAreInvalidArgumentSayingWhy) {
  auto zero = Place({0, AccessHint::kNone}, Roomy(), {});
  ASSERT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "cannot place 0 bytes: a buffer holds at least one");

  auto none = Place({kMiB, AccessHint::kNone}, {}, {});
  ASSERT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "no candidate locations to place 1 MiB in");

  const std::vector<PlacementCandidate> hidden = {Device(0, kGiB, kGiB, false),
                                                  Device(1, kGiB, kGiB, false)};
  auto unmappable = Place({kMiB, AccessHint::kNone}, hidden, {});
  ASSERT_EQ(unmappable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unmappable.status().message(),
            "no candidate location this process can map to place 1 MiB in (device:0, device:1 "
            "cannot be mapped)");

  const std::vector<PlacementCandidate> twice = {Host(kGiB), Device(1, kGiB), Device(1, kGiB)};
  auto duplicate = Place({kMiB, AccessHint::kNone}, twice, {});
  ASSERT_EQ(duplicate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(duplicate.status().message(), "placement candidates list device:1 twice");
}

}  // namespace
}  // namespace memd::broker
