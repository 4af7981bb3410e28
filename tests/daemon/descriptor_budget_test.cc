// The descriptor budget's arithmetic (issue 22, finding 8): under a small
// RLIMIT_NOFILE memd used to lower max_sessions to 1, so that one uid's idle
// session locked every other uid out. Now every descriptor-consuming cap is
// sized from the limit so that kMinUidsServed uids are always served, and
// memd refuses to start below kMinDescriptorLimit.

#include "daemon/descriptor_budget.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The defaults of daemon/config.h.
constexpr DescriptorCaps kDefaults{.max_sessions = 4096,
                                   .max_sessions_per_uid = 256,
                                   .max_connections = 1024,
                                   .max_connections_per_uid = 64,
                                   .max_fds_in_flight_per_session = 32};

DescriptorBudget Budget(const DescriptorCaps& configured, std::uint64_t limit) {
  absl::StatusOr<DescriptorBudget> budget = BudgetDescriptors(configured, limit);
  EXPECT_TRUE(budget.ok()) << budget.status();
  return budget.ok() ? *budget : DescriptorBudget{};
}

TEST(DescriptorBudgetTest, TheUnitsLimitKeepsEveryDefault) {
  // systemd/memd.service.in: LimitNOFILE=524288.
  const DescriptorBudget budget = Budget(kDefaults, 524288);
  EXPECT_EQ(budget.caps.max_sessions, 4096u);
  EXPECT_EQ(budget.caps.max_sessions_per_uid, 256u);
  EXPECT_EQ(budget.caps.max_connections, 1024u);
  EXPECT_EQ(budget.caps.max_connections_per_uid, 64u);
  EXPECT_EQ(budget.caps.max_fds_in_flight_per_session, 32u);
  EXPECT_THAT(budget.lowered, IsEmpty());
}

TEST(DescriptorBudgetTest, UnderALimitOf128FourUidsEachGetSessionsAndConnections) {
  const DescriptorBudget budget = Budget(kDefaults, 128);
  // Half of 128 for clients: 8 sessions of 8 descriptors in flight each
  // (64), and 8 sockets + 56 connections in the table (64).
  EXPECT_EQ(budget.caps.max_fds_in_flight_per_session, 8u);
  EXPECT_EQ(budget.caps.max_sessions, 8u);
  EXPECT_EQ(budget.caps.max_connections, 56u);
  // A quarter each: one uid cannot take what four need.
  EXPECT_EQ(budget.caps.max_sessions_per_uid, 2u);
  EXPECT_EQ(budget.caps.max_connections_per_uid, 14u);
  const std::string log = absl::StrJoin(budget.lowered, "\n");
  EXPECT_THAT(log, HasSubstr("max_sessions lowered from 4096 to 8"));
  EXPECT_THAT(log, HasSubstr("max_fds_in_flight_per_session lowered from 32 to 8"));
  EXPECT_THAT(log, HasSubstr("max_connections lowered from 1024 to 56"));
  EXPECT_THAT(log, HasSubstr("max_sessions_per_uid lowered from 256 to 2"));
  EXPECT_THAT(log, HasSubstr("max_connections_per_uid lowered from 64 to 14"));
  // 2 x max(4096 + 1024, 4096 x 32).
  EXPECT_THAT(log, HasSubstr("need RLIMIT_NOFILE 262144 or more"));
}

// Issue 29: "max_sessions lowered" was logged on every start from a shell
// (RLIMIT_NOFILE 20000, say, against the 262144 the defaults need).
TEST(DescriptorBudgetTest, LoweringIsNewsOnlyForACapTheOperatorChose) {
  const DescriptorBudget defaults = Budget(kDefaults, 20000);
  EXPECT_LT(defaults.caps.max_sessions, kDefaults.max_sessions);
  EXPECT_FALSE(LoweredAChosenCap(kDefaults, kDefaults, defaults.caps));

  DescriptorCaps chosen = kDefaults;
  chosen.max_sessions = 5000;
  EXPECT_TRUE(LoweredAChosenCap(chosen, kDefaults, Budget(chosen, 20000).caps));
  // Chosen, but within the limit: nothing to say.
  EXPECT_FALSE(LoweredAChosenCap(chosen, kDefaults, Budget(chosen, 524288).caps));
  // A per-uid cap chosen and lowered with its lowered total.
  chosen = kDefaults;
  chosen.max_connections_per_uid = 500;
  EXPECT_TRUE(LoweredAChosenCap(chosen, kDefaults, Budget(chosen, 128).caps));
}

TEST(DescriptorBudgetTest, TheInFlightBoundIsKeptWhileEnoughSessionsFit) {
  // 512 for clients: 16 sessions of 32 in flight are enough for 4 uids.
  const DescriptorBudget budget = Budget(kDefaults, 1024);
  EXPECT_EQ(budget.caps.max_fds_in_flight_per_session, 32u);
  EXPECT_EQ(budget.caps.max_sessions, 16u);
  EXPECT_EQ(budget.caps.max_sessions_per_uid, 4u);
  EXPECT_EQ(budget.caps.max_connections, 496u);
  EXPECT_EQ(budget.caps.max_connections_per_uid, 64u);  // 496 / 4 leaves 64 alone.
}

TEST(DescriptorBudgetTest, AtTheMinimumFourUidsGetTwoSessionsEach) {
  const DescriptorBudget budget = Budget(kDefaults, kMinDescriptorLimit);
  EXPECT_EQ(budget.caps.max_fds_in_flight_per_session, kMinFdsInFlightPerSession);
  EXPECT_EQ(budget.caps.max_sessions, kMinUidsServed * kMinSessionsPerUid);
  EXPECT_EQ(budget.caps.max_sessions_per_uid, kMinSessionsPerUid);
  EXPECT_GE(budget.caps.max_connections_per_uid, 1u);
}

TEST(DescriptorBudgetTest, BelowTheMinimumIsRefusedWithTheNumbers) {
  absl::StatusOr<DescriptorBudget> budget = BudgetDescriptors(kDefaults, 63);
  ASSERT_EQ(budget.status().code(), absl::StatusCode::kFailedPrecondition) << budget.status();
  EXPECT_THAT(std::string(budget.status().message()),
              AllOf(HasSubstr("RLIMIT_NOFILE is 63"), HasSubstr("at least 64"),
                    HasSubstr("4 uids"), HasSubstr("LimitNOFILE=")));
}

TEST(DescriptorBudgetTest, SmallConfiguredValuesAreNeverRaised) {
  const DescriptorCaps small{.max_sessions = 3,
                             .max_sessions_per_uid = 3,
                             .max_connections = 5,
                             .max_connections_per_uid = 5,
                             .max_fds_in_flight_per_session = 1};
  const DescriptorBudget budget = Budget(small, 64);
  EXPECT_EQ(budget.caps.max_sessions, 3u);
  EXPECT_EQ(budget.caps.max_sessions_per_uid, 3u);  // The operator's choice.
  EXPECT_EQ(budget.caps.max_connections, 5u);
  EXPECT_EQ(budget.caps.max_fds_in_flight_per_session, 1u);
  EXPECT_THAT(budget.lowered, IsEmpty());
}

TEST(DescriptorBudgetTest, HugeConfiguredValuesDoNotOverflow) {
  constexpr std::uint64_t kMost = ~std::uint64_t{0};
  const DescriptorCaps huge{kMost, kMost, kMost, kMost, kMost};
  const DescriptorBudget budget = Budget(huge, 4096);
  EXPECT_LE(budget.caps.max_sessions + budget.caps.max_connections, 2048u);
  EXPECT_LE(budget.caps.max_sessions * budget.caps.max_fds_in_flight_per_session, 2048u);
  EXPECT_THAT(absl::StrJoin(budget.lowered, "\n"),
              HasSubstr("need RLIMIT_NOFILE 18446744073709551615 or more"));
  // An unlimited RLIMIT_NOFILE lowers nothing it can carry.
  EXPECT_THAT(Budget(kDefaults, kMost).lowered, IsEmpty());
}

// What the budget promises, over limits from the minimum up and a few
// configurations: clients' descriptors fit half the limit in the table and
// half in flight; kMinUidsServed uids are served; nothing is raised.
TEST(DescriptorBudgetTest, EveryLimitKeepsItsPromises) {
  const DescriptorCaps configurations[] = {
      kDefaults,
      {.max_sessions = 100000, .max_sessions_per_uid = 100000, .max_connections = 10,
       .max_connections_per_uid = 10, .max_fds_in_flight_per_session = 1000},
      {.max_sessions = 64, .max_sessions_per_uid = 8, .max_connections = 100000,
       .max_connections_per_uid = 100000, .max_fds_in_flight_per_session = 4},
  };
  for (const DescriptorCaps& configured : configurations) {
    for (std::uint64_t limit = kMinDescriptorLimit; limit <= (1u << 20);
         limit += limit / 7 + 1) {
      SCOPED_TRACE(testing::Message() << "RLIMIT_NOFILE " << limit << ", max_sessions "
                                      << configured.max_sessions);
      const DescriptorCaps caps = Budget(configured, limit).caps;
      const std::uint64_t half = limit / 2;
      EXPECT_LE(caps.max_sessions + caps.max_connections, half);
      EXPECT_LE(caps.max_sessions * caps.max_fds_in_flight_per_session, half);
      EXPECT_GE(caps.max_sessions, std::min(configured.max_sessions,
                                            kMinUidsServed * kMinSessionsPerUid));
      EXPECT_GE(caps.max_connections, std::min(configured.max_connections, kMinUidsServed));
      if (caps.max_sessions < configured.max_sessions) {
        EXPECT_LE(caps.max_sessions_per_uid * kMinUidsServed, caps.max_sessions);
      }
      if (caps.max_connections < configured.max_connections) {
        EXPECT_LE(caps.max_connections_per_uid * kMinUidsServed, caps.max_connections);
      }
      EXPECT_LE(caps.max_sessions, configured.max_sessions);
      EXPECT_LE(caps.max_sessions_per_uid, configured.max_sessions_per_uid);
      EXPECT_LE(caps.max_connections, configured.max_connections);
      EXPECT_LE(caps.max_connections_per_uid, configured.max_connections_per_uid);
      EXPECT_LE(caps.max_fds_in_flight_per_session,
                configured.max_fds_in_flight_per_session);
      EXPECT_GE(caps.max_fds_in_flight_per_session,
                std::min(configured.max_fds_in_flight_per_session, kMinFdsInFlightPerSession));
    }
  }
}

}  // namespace
}  // namespace memd
