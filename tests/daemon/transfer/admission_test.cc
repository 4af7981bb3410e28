// Admission alone: what a session, a uid and the daemon may have unfinished,
// and the refusals' words.

#include "daemon/transfer/admission.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace memd::transfer {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr uid_t kAlice = 61001;
constexpr uid_t kMallory = 61003;

AdmissionLimits Roomy() {
  return AdmissionLimits{.max_session_bytes = 1024 * kMiB,
                         .max_uid_bytes = 1024 * kMiB,
                         .max_total_bytes = 1024 * kMiB,
                         .max_session_transfers = 100,
                         .max_uid_transfers = 100};
}

// Issue 22, finding 3: four sessions of one uid filled the daemon's whole
// budget, and other uids' copies were refused.
TEST(AdmissionLimitsTest, BeyondTheUidsTransfersACopyIsRefusedWithTheNumbersAndTheKey) {
  AdmissionLimits limits = Roomy();
  limits.max_session_transfers = 2;
  limits.max_uid_transfers = 3;
  Admission admission(limits);
  ASSERT_TRUE(admission.Admit(1, kMallory, kMiB).ok());
  ASSERT_TRUE(admission.Admit(1, kMallory, kMiB).ok());
  ASSERT_TRUE(admission.Admit(2, kMallory, kMiB).ok());
  const absl::Status refused = admission.Admit(2, kMallory, kMiB);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "uid 61003 has 3 unfinished transfers; the limit is 3 "
            "(transfer_max_uid_transfers); wait for one to end");
  // Nothing was charged for it.
  EXPECT_EQ(admission.uid_activity(kMallory).transfers, 3u);
  EXPECT_EQ(admission.uid_activity(kMallory).bytes, 3 * kMiB);
  EXPECT_EQ(admission.total_transfers(), 3u);
  // Another uid is admitted; mallory again once one of hers ended.
  EXPECT_TRUE(admission.Admit(3, kAlice, kMiB).ok());
  admission.Release(1, kMallory, kMiB);
  EXPECT_TRUE(admission.Admit(2, kMallory, kMiB).ok());
}

TEST(AdmissionLimitsTest, BeyondTheUidsBytesACopyIsRefusedWithTheNumbersAndTheKey) {
  AdmissionLimits limits = Roomy();
  limits.max_session_bytes = 3 * kMiB;
  limits.max_uid_bytes = 4 * kMiB;
  limits.max_total_bytes = 16 * kMiB;
  Admission admission(limits);
  ASSERT_TRUE(admission.Admit(1, kMallory, 2 * kMiB).ok());
  ASSERT_TRUE(admission.Admit(2, kMallory, 2 * kMiB).ok());
  const absl::Status refused = admission.Admit(3, kMallory, kMiB);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "uid 61003 has 4 MiB in flight; this copy of 1 MiB would exceed the limit of "
            "4 MiB (transfer_max_uid_bytes)");
  EXPECT_EQ(admission.total_bytes(), 4 * kMiB);
  EXPECT_TRUE(admission.Admit(4, kAlice, 3 * kMiB).ok());
}

TEST(AdmissionLimitsTest, TheNarrowestLimitReachedIsTheOneNamed) {
  AdmissionLimits limits = Roomy();
  limits.max_session_transfers = 1;
  limits.max_uid_transfers = 1;
  limits.max_session_bytes = 2 * kMiB;
  limits.max_uid_bytes = 2 * kMiB;
  limits.max_total_bytes = 3 * kMiB;
  Admission admission(limits);
  ASSERT_TRUE(admission.Admit(1, kMallory, 2 * kMiB).ok());
  // The session is full as much as its uid: the session is named.
  EXPECT_EQ(admission.Admit(1, kMallory, kMiB).message(),
            "session 1 has 1 unfinished transfers; the limit is 1 "
            "(transfer_max_session_transfers); wait for one to end");
  EXPECT_EQ(admission.Admit(2, kMallory, kMiB).message(),
            "uid 61003 has 1 unfinished transfers; the limit is 1 "
            "(transfer_max_uid_transfers); wait for one to end");
  // A uid within its own limits is refused only by the daemon's.
  EXPECT_EQ(admission.Admit(3, kAlice, 2 * kMiB).message(),
            "the daemon has 2 MiB in flight; this copy of 2 MiB would exceed the limit of "
            "3 MiB (transfer_max_total_bytes)");
  EXPECT_TRUE(admission.Admit(3, kAlice, kMiB).ok());
}

TEST(AdmissionLimitsTest, RefusalsAreCountedByTheKeyOfTheirLimit) {
  AdmissionLimits limits = Roomy();
  limits.max_session_transfers = 1;
  limits.max_uid_bytes = 2 * kMiB;
  Admission admission(limits);
  ASSERT_TRUE(admission.Admit(1, kMallory, kMiB).ok());
  EXPECT_FALSE(admission.Admit(1, kMallory, kMiB).ok());
  EXPECT_FALSE(admission.Admit(2, kMallory, 2 * kMiB).ok());
  EXPECT_FALSE(admission.Admit(3, kMallory, 2 * kMiB).ok());
  EXPECT_EQ(admission.rejections(), 3u);
  EXPECT_EQ(admission.rejections_by_limit(),
            (std::map<std::string, std::uint64_t>{{"transfer_max_session_transfers", 1},
                                                  {"transfer_max_uid_bytes", 2}}));
}

TEST(AdmissionLimitsTest, ReleaseGivesTheChargeBackToSessionUidAndDaemon) {
  Admission admission(Roomy());
  ASSERT_TRUE(admission.Admit(1, kMallory, 3 * kMiB).ok());
  ASSERT_TRUE(admission.Admit(2, kMallory, 5 * kMiB).ok());
  admission.Release(1, kMallory, 3 * kMiB);
  EXPECT_EQ(admission.uid_activity(kMallory).transfers, 1u);
  EXPECT_EQ(admission.uid_activity(kMallory).bytes, 5 * kMiB);
  admission.Release(2, kMallory, 5 * kMiB);
  EXPECT_EQ(admission.uid_activity(kMallory).transfers, 0u);
  EXPECT_EQ(admission.uid_activity(kMallory).bytes, 0u);
  EXPECT_EQ(admission.total_transfers(), 0u);
  EXPECT_EQ(admission.total_bytes(), 0u);
  // A release nobody was charged for changes nothing.
  admission.Release(9, kAlice, kMiB);
  EXPECT_EQ(admission.total_bytes(), 0u);
}

}  // namespace
}  // namespace memd::transfer
