#include "daemon/broker/uid_counts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;
using Kind = UidCounts::Kind;

TEST(UidCountsTest, AdmitsUpToTheLimitAndThenRefusesWithTheNumbersAndTheKey) {
  UidCounts counts;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(counts.Admit(61003, Kind::kSessions, 3).ok()) << i;
    counts.Add(61003, Kind::kSessions);
  }
  const absl::Status refused = counts.Admit(61003, Kind::kSessions, 3);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "uid 61003 holds 3 sessions; the limit is 3 (max_sessions_per_uid)");
  EXPECT_THAT(counts.Admit(61003, Kind::kBuffers, 0).message(),
              HasSubstr("owns 0 buffers; the limit is 0 (max_buffers_per_uid)"));
  EXPECT_THAT(counts.Admit(61003, Kind::kLeases, 0).message(),
              HasSubstr("holds 0 leases; the limit is 0 (max_leases_per_uid)"));
}

TEST(UidCountsTest, OneUidsCountsCostNoOtherUid) {
  UidCounts counts;
  counts.Add(61003, Kind::kLeases);
  counts.Add(61003, Kind::kLeases);
  EXPECT_FALSE(counts.Admit(61003, Kind::kLeases, 2).ok());
  EXPECT_TRUE(counts.Admit(61001, Kind::kLeases, 2).ok());
  EXPECT_EQ(counts.Of(61001, Kind::kLeases), 0u);
  EXPECT_EQ(counts.Of(61003, Kind::kSessions), 0u) << "kinds are counted apart";
}

TEST(UidCountsTest, AUidHoldingNothingIsForgotten) {
  UidCounts counts;
  counts.Add(61001, Kind::kSessions);
  counts.Add(61001, Kind::kBuffers);
  EXPECT_EQ(counts.uids(), 1u);
  counts.Remove(61001, Kind::kSessions);
  EXPECT_EQ(counts.uids(), 1u) << "still owns a buffer";
  counts.Remove(61001, Kind::kBuffers);
  EXPECT_EQ(counts.uids(), 0u);
}

TEST(UidCountsTest, RemovingWhatWasNeverAddedChangesNothing) {
  UidCounts counts;
  counts.Remove(61002, Kind::kLeases);
  EXPECT_EQ(counts.uids(), 0u);
  counts.Add(61002, Kind::kBuffers);
  counts.Remove(61002, Kind::kLeases);
  EXPECT_EQ(counts.Of(61002, Kind::kBuffers), 1u);
  EXPECT_EQ(counts.Of(61002, Kind::kLeases), 0u);
}

}  // namespace
}  // namespace memd::broker
