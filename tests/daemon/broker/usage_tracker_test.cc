#include "daemon/broker/usage_tracker.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
const Location kHost = Location::Host();
const Location kPinned = Location::Pinned();
const Location kDev0 = Location::Device(0);
const Location kDev1 = Location::Device(1);
// A minute boundary, so that "+ 59 minutes" is the last minute of a window.
const absl::Time kStart = absl::FromUnixSeconds(1'700'000'040);

// (location, recent opens) pairs of an activity, for compact expectations.
std::vector<std::pair<std::string, std::uint64_t>> RecentOpens(const BufferActivity& activity) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const LocationActivity& a : activity.locations) {
    out.emplace_back(a.location.ToString(), a.recent_opens);
  }
  return out;
}

TEST(UsageTrackerTest, AnUnknownBufferReadsAsNeverUsed) {
  UsageTracker tracker;
  const BufferUsage usage = tracker.Of(7);
  EXPECT_THAT(usage.opens_by_location, IsEmpty());
  EXPECT_THAT(usage.opens_by_uid, IsEmpty());
  EXPECT_EQ(usage.lazy_copies, 0u);
  EXPECT_THAT(usage.bytes_copied, IsEmpty());
  EXPECT_EQ(usage.copies_avoided, 0u);
  EXPECT_FALSE(usage.last_used.has_value());
  EXPECT_THAT(tracker.Activity(7, kStart).locations, IsEmpty());
  EXPECT_EQ(tracker.size(), 0u) << "reading makes no record";
}

TEST(UsageTrackerTest, CountsOpensByLocationAndUid) {
  UsageTracker tracker;
  tracker.Opened(1, kHost, 1000, kStart, false);
  tracker.Opened(1, kDev0, 1000, kStart + absl::Seconds(1), false);
  tracker.Opened(1, kDev0, 1001, kStart + absl::Seconds(2), true);
  tracker.Opened(1, Location::Device(10), 1001, kStart + absl::Seconds(3), true);
  tracker.Opened(2, kPinned, 0, kStart, false);

  const BufferUsage usage = tracker.Of(1);
  EXPECT_THAT(usage.opens_by_location,
              ElementsAre(Pair("device:0", 2u), Pair("device:10", 1u), Pair("host", 1u)));
  EXPECT_THAT(usage.opens_by_uid, ElementsAre(Pair(1000u, 2u), Pair(1001u, 2u)));
  EXPECT_EQ(usage.copies_avoided, 2u);
  EXPECT_EQ(usage.last_used, kStart + absl::Seconds(3));
  EXPECT_THAT(tracker.Of(2).opens_by_location, ElementsAre(Pair("pinned", 1u)));
  EXPECT_EQ(tracker.size(), 2u);
}

TEST(UsageTrackerTest, CountsCopiesAndTheirBytesByDirection) {
  UsageTracker tracker;
  tracker.Copied(1, kHost, kDev0, 4 * kGiB, kStart);
  tracker.Copied(1, kPinned, kDev1, 1 * kGiB, kStart);
  tracker.Copied(1, kDev0, kDev1, 2 * kGiB, kStart);
  tracker.Copied(1, kDev1, kPinned, 8, kStart);
  tracker.Copied(1, kHost, kPinned, 16, kStart);

  const BufferUsage usage = tracker.Of(1);
  EXPECT_EQ(usage.lazy_copies, 5u);
  EXPECT_THAT(usage.bytes_copied,
              ElementsAre(Pair("device_to_device", 2 * kGiB), Pair("device_to_host", 8u),
                          Pair("host_to_device", 5 * kGiB), Pair("host_to_host", 16u)));
  EXPECT_FALSE(usage.last_used.has_value()) << "a copy is not a use";
  EXPECT_EQ(tracker.Activity(1, kStart).recent_bytes_copied, 7 * kGiB + 24);
}

TEST(UsageTrackerTest, NamesEveryDirection) {
  EXPECT_EQ(CopyDirectionName(DirectionOf(kPinned, kDev0)), "host_to_device");
  EXPECT_EQ(CopyDirectionName(DirectionOf(kDev0, kHost)), "device_to_host");
  EXPECT_EQ(CopyDirectionName(DirectionOf(kDev1, kDev0)), "device_to_device");
  EXPECT_EQ(CopyDirectionName(DirectionOf(kPinned, kHost)), "host_to_host");
}

TEST(UsageTrackerTest, TheWindowHoldsTheLastHourAndRollsOver) {
  UsageTracker tracker;
  tracker.Opened(1, kDev0, 1000, kStart, false);                          // Minute 0.
  tracker.Copied(1, kHost, kDev0, 100, kStart);
  tracker.Opened(1, kDev0, 1000, kStart + absl::Minutes(30), false);      // Minute 30.
  tracker.Opened(1, kHost, 1000, kStart + absl::Minutes(59), false);      // Minute 59.
  tracker.Copied(1, kHost, kDev0, 10, kStart + absl::Minutes(59));

  EXPECT_THAT(RecentOpens(tracker.Activity(1, kStart + absl::Minutes(59) + absl::Seconds(59))),
              ElementsAre(Pair("host", 1u), Pair("device:0", 2u)))
      << "minute 0 is still the oldest of 60 buckets";
  EXPECT_EQ(tracker.Activity(1, kStart + absl::Minutes(59)).recent_bytes_copied, 110u);

  const BufferActivity later = tracker.Activity(1, kStart + absl::Minutes(60));
  EXPECT_THAT(RecentOpens(later), ElementsAre(Pair("host", 1u), Pair("device:0", 1u)))
      << "minute 0 left the window";
  EXPECT_EQ(later.recent_bytes_copied, 10u);
  EXPECT_EQ(later.locations[1].last_opened, kStart + absl::Minutes(30))
      << "the last open stays after its bucket expires";

  EXPECT_THAT(RecentOpens(tracker.Activity(1, kStart + absl::Hours(3))),
              ElementsAre(Pair("host", 0u), Pair("device:0", 0u)));
  EXPECT_EQ(tracker.Of(1).opens_by_location.at("device:0"), 2u) << "totals never expire";
}

TEST(UsageTrackerTest, ANewEventDropsExpiredBucketsAndCountsOnlyItsOwn) {
  UsageTracker tracker;
  for (int minute = 0; minute < 60; ++minute) {
    tracker.Opened(1, kDev0, 1000, kStart + absl::Minutes(minute), false);
  }
  EXPECT_THAT(RecentOpens(tracker.Activity(1, kStart + absl::Minutes(59))),
              ElementsAre(Pair("device:0", 60u)));
  tracker.Opened(1, kDev0, 1000, kStart + absl::Hours(5), false);
  EXPECT_THAT(RecentOpens(tracker.Activity(1, kStart + absl::Hours(5))),
              ElementsAre(Pair("device:0", 1u)));
}

TEST(UsageTrackerTest, AClockSteppingBackCountsIntoTheNewestBucket) {
  UsageTracker tracker;
  tracker.Opened(1, kDev0, 1000, kStart + absl::Minutes(10), false);
  tracker.Opened(1, kDev0, 1000, kStart, false);  // Ten minutes back.
  EXPECT_EQ(tracker.Of(1).last_used, kStart + absl::Minutes(10)) << "the latest open stays";
  EXPECT_EQ(tracker.Activity(1, kStart).locations[0].last_opened, kStart + absl::Minutes(10));
  tracker.Opened(1, kDev0, 1000, kStart + absl::Minutes(69), false);
  EXPECT_THAT(RecentOpens(tracker.Activity(1, kStart + absl::Minutes(69))),
              ElementsAre(Pair("device:0", 3u)))
      << "the stepped-back open sits in minute 10, still in the window";
}

TEST(UsageTrackerTest, UidsBeyondTheCapCountAsOther) {
  UsageTracker tracker;
  const std::uint32_t first = 5000;
  for (std::uint32_t i = 0; i < UsageTracker::kMaxUids + 10; ++i) {
    tracker.Opened(1, kHost, first + i, kStart, false);
  }
  tracker.Opened(1, kHost, first, kStart, false);  // A named uid keeps counting.
  tracker.Opened(1, kHost, first + UsageTracker::kMaxUids + 20, kStart, false);

  const BufferUsage usage = tracker.Of(1);
  ASSERT_EQ(usage.opens_by_uid.size(), UsageTracker::kMaxUids + 1);
  EXPECT_EQ(usage.opens_by_uid.at(first), 2u);
  EXPECT_EQ(usage.opens_by_uid.at(first + UsageTracker::kMaxUids - 1), 1u);
  EXPECT_FALSE(usage.opens_by_uid.contains(first + UsageTracker::kMaxUids));
  EXPECT_EQ(usage.opens_by_uid.at(UsageTracker::kOtherUids), 11u);
}

TEST(UsageTrackerTest, LocationsBeyondTheCapCountAsOther) {
  UsageTracker tracker;
  for (int device = 0; device < static_cast<int>(UsageTracker::kMaxLocations) + 3; ++device) {
    tracker.Opened(1, Location::Device(device), 1000, kStart, false);
  }
  const BufferUsage usage = tracker.Of(1);
  EXPECT_EQ(usage.opens_by_location.size(), UsageTracker::kMaxLocations + 1);
  EXPECT_EQ(usage.opens_by_location.at("other"), 3u);
  EXPECT_EQ(tracker.Activity(1, kStart).locations.size(), UsageTracker::kMaxLocations)
      << "the window and last-open times only for the named locations";
  EXPECT_EQ(usage.opens_by_uid.at(1000), UsageTracker::kMaxLocations + 3)
      << "every open still counts for its uid";
}

TEST(UsageTrackerTest, ForgetDropsTheRecord) {
  UsageTracker tracker;
  tracker.Opened(1, kDev0, 1000, kStart, true);
  tracker.Copied(1, kHost, kDev0, 64, kStart);
  tracker.Opened(2, kHost, 1000, kStart, false);
  tracker.Forget(1);
  tracker.Forget(99);  // Never seen: nothing to do.
  EXPECT_EQ(tracker.size(), 1u);
  EXPECT_THAT(tracker.Of(1).opens_by_location, IsEmpty());
  EXPECT_EQ(tracker.Of(1).lazy_copies, 0u);
  EXPECT_EQ(tracker.Of(1).copies_avoided, 0u);
  EXPECT_THAT(tracker.Of(2).opens_by_location, ElementsAre(Pair("host", 1u)));
}

}  // namespace
}  // namespace memd::broker
