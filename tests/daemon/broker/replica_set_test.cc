// The replica state machine alone: every transition, every refusal with its
// code and numbers, races of a writer and readers against fills played out
// step by step, and a seeded random walk that checks the invariants after
// every call.

#include "daemon/broker/replica_set.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Location kHost = Location::Host();
const Location kPinned = Location::Pinned();
const Location kDev0 = Location::Device(0);
const Location kDev1 = Location::Device(1);
const Location kDev2 = Location::Device(2);

ReplicaSet Make(const Location& primary, std::size_t max = 8) {
  absl::StatusOr<ReplicaSet> set = ReplicaSet::Created(primary, max);
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

const ReplicaReport* At(const std::vector<ReplicaReport>& reports, const Location& at) {
  for (const ReplicaReport& r : reports) {
    if (r.location == at) return &r;
  }
  return nullptr;
}

ReplicaState StateAt(const ReplicaSet& set, const Location& at) {
  const std::vector<ReplicaReport> reports = set.Replicas();
  const ReplicaReport* r = At(reports, at);
  EXPECT_NE(r, nullptr) << at.ToString();
  return r == nullptr ? ReplicaState::kStale : r->state;
}

// Fills `at` from whatever the set chooses, successfully.
void Fill(ReplicaSet& set, const Location& at) {
  absl::StatusOr<FillTicket> ticket = set.BeginFill(at);
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  absl::StatusOr<FillResult> result = set.FinishFill(*ticket, absl::OkStatus());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(*result, FillResult::kCurrent);
}

// A writer at `at` writes and lets go.
void Write(ReplicaSet& set, const Location& at) {
  ASSERT_TRUE(set.AddWriter(at).ok());
  ASSERT_TRUE(set.Written(at).ok());
  ASSERT_TRUE(set.RemoveWriter(at).ok());
}

// The invariants the class comment promises.
void CheckInvariants(const ReplicaSet& set, const std::string& where) {
  std::size_t current = 0;
  const std::vector<ReplicaReport> reports = set.Replicas();
  EXPECT_LE(reports.size(), set.max_replicas()) << where;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const ReplicaReport& r = reports[i];
    SCOPED_TRACE(where + " at " + r.location.ToString());
    EXPECT_EQ(r.state == ReplicaState::kCurrent, r.generation == set.generation());
    EXPECT_LE(r.generation, set.generation());
    if (r.state == ReplicaState::kCurrent) ++current;
    if (r.state == ReplicaState::kFilling) {
      EXPECT_EQ(r.readers, 0u);
      EXPECT_EQ(r.writers, 0u);
    }
    // Counts are unsigned: "below zero" would show as a huge number.
    EXPECT_LT(r.readers, 1u << 20);
    EXPECT_LT(r.writers, 1u << 20);
    for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(reports[j].location == r.location);
  }
  EXPECT_GE(current, 1u) << where;
}

TEST(ReplicaSetTest, CreatedHasOneCurrentReplicaAtGenerationOne) {
  ReplicaSet set = Make(kDev1);
  EXPECT_EQ(set.generation(), 1u);
  const std::vector<ReplicaReport> reports = set.Replicas();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].location, kDev1);
  EXPECT_EQ(reports[0].state, ReplicaState::kCurrent);
  EXPECT_EQ(reports[0].generation, 1u);
  EXPECT_EQ(reports[0].readers, 0u);
  EXPECT_EQ(reports[0].writers, 0u);
  EXPECT_FALSE(set.last_failure().has_value());
  EXPECT_TRUE(set.SyncTargets().empty());
}

TEST(ReplicaSetTest, CreatedWithNoRoomIsInvalidArgument) {
  absl::StatusOr<ReplicaSet> set = ReplicaSet::Created(kHost, 0);
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("max_replicas is 0"));
}

TEST(ReplicaSetTest, PlanOpenServesACurrentReplica) {
  ReplicaSet set = Make(kHost);
  for (bool write : {false, true}) {
    absl::StatusOr<OpenPlan> plan = set.PlanOpen(kHost, write);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->action, OpenPlan::Action::kServe);
    EXPECT_FALSE(plan->source.has_value());
  }
}

TEST(ReplicaSetTest, PlanOpenWithoutAReplicaFillsFromACurrentOne) {
  ReplicaSet set = Make(kHost);
  absl::StatusOr<OpenPlan> plan = set.PlanOpen(kDev0, false);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, OpenPlan::Action::kFill);
  EXPECT_EQ(plan->source, kHost);
  EXPECT_EQ(set.size(), 1u) << "PlanOpen changes nothing";
}

TEST(ReplicaSetTest, PlanOpenWaitsForARunningFill) {
  ReplicaSet set = Make(kHost);
  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  for (bool write : {false, true}) {
    absl::StatusOr<OpenPlan> plan = set.PlanOpen(kDev0, write);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->action, OpenPlan::Action::kWait);
  }
}

TEST(ReplicaSetTest, PlanOpenRefillsAStaleReplicaNobodyHolds) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  Write(set, kHost);
  absl::StatusOr<OpenPlan> plan = set.PlanOpen(kDev0, false);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, OpenPlan::Action::kFill);
  EXPECT_EQ(plan->source, kHost);
}

TEST(ReplicaSetTest, PlanOpenOfALeasedStaleReplicaIsBusy) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  ASSERT_TRUE(set.AddReader(kDev0).ok());
  Write(set, kHost);
  ASSERT_EQ(StateAt(set, kDev0), ReplicaState::kStale);
  for (bool write : {false, true}) {
    absl::StatusOr<OpenPlan> plan = set.PlanOpen(kDev0, write);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->action, OpenPlan::Action::kBusy);
  }
  // Served elsewhere meanwhile: the host is current.
  EXPECT_EQ(set.PlanOpen(kHost, false)->action, OpenPlan::Action::kServe);
  // The reader lets go: now it refills.
  ASSERT_TRUE(set.RemoveReader(kDev0).ok());
  EXPECT_EQ(set.PlanOpen(kDev0, false)->action, OpenPlan::Action::kFill);
}

TEST(ReplicaSetTest, PlanOpenForWriteOfAReadReplicaIsBusy) {
  ReplicaSet set = Make(kHost);
  ASSERT_TRUE(set.AddReader(kHost).ok());
  EXPECT_EQ(set.PlanOpen(kHost, true)->action, OpenPlan::Action::kBusy);
  EXPECT_EQ(set.PlanOpen(kHost, false)->action, OpenPlan::Action::kServe);
}

TEST(ReplicaSetTest, SourcePrefersTheSameKind) {
  // device <- lowest other current device (peer copy).
  ReplicaSet set = Make(kHost);
  Fill(set, kPinned);
  Fill(set, kDev2);
  Fill(set, kDev1);
  EXPECT_EQ(set.PlanOpen(kDev0, false)->source, kDev1);
  // host-side <- the other host-side replica, pinned before host.
  ASSERT_TRUE(set.Drop(kHost).ok());
  EXPECT_EQ(set.PlanOpen(kHost, false)->source, kPinned);
}

TEST(ReplicaSetTest, SourceFallsBackToTheOtherSide) {
  // device <- pinned before host when no device is current.
  ReplicaSet set = Make(kHost);
  Fill(set, kPinned);
  EXPECT_EQ(set.PlanOpen(kDev0, false)->source, kPinned);
  ASSERT_TRUE(set.Drop(kPinned).ok());
  EXPECT_EQ(set.PlanOpen(kDev0, false)->source, kHost);
  // host <- lowest current device when no host-side replica is current.
  ReplicaSet dev = Make(kDev2);
  Fill(dev, kDev1);
  EXPECT_EQ(dev.PlanOpen(kHost, false)->source, kDev1);
  EXPECT_EQ(dev.PlanOpen(kPinned, false)->source, kDev1);
}

TEST(ReplicaSetTest, SourceSkipsStaleAndFillingReplicas) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  ASSERT_TRUE(set.BeginFill(kDev1).ok());
  Write(set, kHost);  // dev0 stale, dev1 filling.
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev2);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(ticket->source, kHost);
}

TEST(ReplicaSetTest, BeginFillOfANewReplicaCreatesItFilling) {
  ReplicaSet set = Make(kHost);
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev0);
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  EXPECT_EQ(ticket->at, kDev0);
  EXPECT_EQ(ticket->source, kHost);
  EXPECT_EQ(ticket->generation, 1u);
  EXPECT_TRUE(ticket->created);
  const std::vector<ReplicaReport> reports = set.Replicas();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].location, kDev0);
  EXPECT_EQ(reports[1].state, ReplicaState::kFilling);
  EXPECT_EQ(reports[1].generation, 0u);
}

TEST(ReplicaSetTest, BeginFillOfAStaleReplicaKeepsItsGenerationUntilDone) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  Write(set, kHost);
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev0);
  ASSERT_TRUE(ticket.ok());
  EXPECT_FALSE(ticket->created);
  EXPECT_EQ(ticket->generation, 2u);
  EXPECT_EQ(At(set.Replicas(), kDev0)->generation, 1u);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kFilling);
  EXPECT_EQ(*set.FinishFill(*ticket, absl::OkStatus()), FillResult::kCurrent);
  EXPECT_EQ(At(set.Replicas(), kDev0)->generation, 2u);
}

TEST(ReplicaSetTest, BeginFillRefusals) {
  ReplicaSet set = Make(kHost);
  absl::Status current = set.BeginFill(kHost).status();
  EXPECT_EQ(current.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(current.message(), HasSubstr("host is current (generation 1)"));

  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  absl::Status twice = set.BeginFill(kDev0).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("a fill of device:0 to generation 1 is running"));

  Fill(set, kDev1);
  ASSERT_TRUE(set.AddReader(kDev1).ok());
  ASSERT_TRUE(set.AddReader(kDev1).ok());
  Write(set, kHost);
  absl::Status leased = set.BeginFill(kDev1).status();
  EXPECT_EQ(leased.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(leased.message(),
              HasSubstr("stale replica at device:1 (generation 1) has 2 read and 0 writable"));
}

TEST(ReplicaSetTest, TheCapIsResourceExhaustedWithTheNumbers) {
  ReplicaSet set = Make(kHost, 2);
  Fill(set, kDev0);
  absl::Status plan = set.PlanOpen(kDev1, false).status();
  EXPECT_EQ(plan.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.message(), HasSubstr("device:1 would make 3 replicas of this buffer; it may have at most 2"));
  absl::Status begin = set.BeginFill(kDev1).status();
  EXPECT_EQ(begin.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(set.size(), 2u);
  // Existing replicas are not counted again: a stale one still refills.
  Write(set, kHost);
  EXPECT_EQ(set.PlanOpen(kDev0, false)->action, OpenPlan::Action::kFill);
  Fill(set, kDev0);
  // Dropping one makes room.
  ASSERT_TRUE(set.Drop(kDev0).ok());
  EXPECT_TRUE(set.BeginFill(kDev1).ok());
}

TEST(ReplicaSetTest, OneReplicaPerLocation) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  EXPECT_EQ(set.BeginFill(kDev0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(set.size(), 2u);
}

TEST(ReplicaSetTest, FinishFillSucceedsCurrent) {
  ReplicaSet set = Make(kHost);
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev0);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(*set.FinishFill(*ticket, absl::OkStatus()), FillResult::kCurrent);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kCurrent);
  EXPECT_EQ(set.State(), SyncState::kSynchronized);
  // The same ticket again: not running.
  absl::Status again = set.FinishFill(*ticket, absl::OkStatus()).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("fill 1 of device:0 is not running"));
}

TEST(ReplicaSetTest, FinishFillWithAnOlderTicketIsRefused) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);  // Fill 1.
  Write(set, kHost);
  FillTicket old{1, kDev0, kHost, 1, true};
  ASSERT_TRUE(set.BeginFill(kDev0).ok());  // Fill 2.
  EXPECT_EQ(set.FinishFill(old, absl::OkStatus()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kFilling);
}

TEST(ReplicaSetTest, FailedFillOfANewReplicaRemovesItAndSaysWhy) {
  ReplicaSet set = Make(kHost);
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev0);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(*set.FinishFill(*ticket, absl::UnavailableError("copy engine gone")),
            FillResult::kRemoved);
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.State(), SyncState::kHostOnly);
  ASSERT_TRUE(set.last_failure().has_value());
  EXPECT_EQ(set.last_failure()->at, kDev0);
  EXPECT_EQ(set.last_failure()->generation, 1u);
  EXPECT_EQ(set.last_failure()->status, absl::UnavailableError("copy engine gone"));
  // Still usable where it was; the next open tries again.
  EXPECT_EQ(set.PlanOpen(kHost, false)->action, OpenPlan::Action::kServe);
  EXPECT_EQ(set.PlanOpen(kDev0, false)->action, OpenPlan::Action::kFill);
  // A fill there that succeeds clears the failure.
  Fill(set, kDev0);
  EXPECT_FALSE(set.last_failure().has_value());
}

TEST(ReplicaSetTest, FailedFillOfAnExistingReplicaLeavesItStale) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  Write(set, kHost);
  absl::StatusOr<FillTicket> ticket = set.BeginFill(kDev0);
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(*set.FinishFill(*ticket, absl::DataLossError("ECC")), FillResult::kStaleAgain);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kStale);
  EXPECT_EQ(At(set.Replicas(), kDev0)->generation, 1u);
  EXPECT_EQ(set.last_failure()->status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(set.SyncTargets(), ElementsAre(kDev0));
  // A failure elsewhere's success does not clear it.
  Fill(set, kDev1);
  EXPECT_TRUE(set.last_failure().has_value());
}

// The race the issue names: a fill begins, a writer's Sync lands, the fill
// finishes with bytes of the old generation and must not be served.
TEST(ReplicaSetTest, AWriteDuringAFillFinishesItStaleThenItRefills) {
  ReplicaSet set = Make(kHost);
  absl::StatusOr<FillTicket> first = set.BeginFill(kDev0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(set.AddWriter(kHost).ok());
  ASSERT_TRUE(set.Written(kHost).ok());  // Generation 2 while copying 1.
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kFilling);
  EXPECT_EQ(*set.FinishFill(*first, absl::OkStatus()), FillResult::kOutdated);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kStale);
  EXPECT_EQ(At(set.Replicas(), kDev0)->generation, 1u);
  EXPECT_EQ(set.AddReader(kDev0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(set.SyncTargets(), ElementsAre(kDev0));
  // The refill copies generation 2.
  absl::StatusOr<FillTicket> second = set.BeginFill(kDev0);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->generation, 2u);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(*set.FinishFill(*second, absl::OkStatus()), FillResult::kCurrent);
  EXPECT_TRUE(set.AddReader(kDev0).ok());
}

// Readers on device:0 and device:1 keep their bytes while a writer on the
// host syncs twice; new readers go to the host until they let go.
TEST(ReplicaSetTest, ReadersKeepTheirReplicaWhileAWriterSyncs) {
  ReplicaSet set = Make(kHost);
  Fill(set, kDev0);
  Fill(set, kDev1);
  ASSERT_TRUE(set.AddReader(kDev0).ok());
  ASSERT_TRUE(set.AddReader(kDev1).ok());
  ASSERT_TRUE(set.AddWriter(kHost).ok());
  ASSERT_TRUE(set.Written(kHost).ok());
  EXPECT_EQ(set.State(), SyncState::kHostDirty);
  EXPECT_TRUE(set.SyncTargets().empty()) << "both stale replicas are held";
  EXPECT_EQ(set.PlanOpen(kDev0, false)->action, OpenPlan::Action::kBusy);
  ASSERT_TRUE(set.RemoveReader(kDev1).ok());
  EXPECT_THAT(set.SyncTargets(), ElementsAre(kDev1));
  absl::StatusOr<FillTicket> fill = set.BeginFill(kDev1);
  ASSERT_TRUE(fill.ok());
  ASSERT_TRUE(set.Written(kHost).ok());  // A second sync while dev1 fills.
  EXPECT_EQ(set.generation(), 3u);
  EXPECT_EQ(*set.FinishFill(*fill, absl::OkStatus()), FillResult::kOutdated);
  EXPECT_EQ(At(set.Replicas(), kDev1)->generation, 2u);
  ASSERT_TRUE(set.RemoveWriter(kHost).ok());
  ASSERT_TRUE(set.RemoveReader(kDev0).ok());
  EXPECT_THAT(set.SyncTargets(), ElementsAre(kDev0, kDev1));
  Fill(set, kDev0);
  Fill(set, kDev1);
  EXPECT_EQ(set.State(), SyncState::kSynchronized);
}

TEST(ReplicaSetTest, WrittenMakesTheWriterCurrentAndOthersStale) {
  ReplicaSet set = Make(kHost);
  Fill(set, kPinned);
  Fill(set, kDev0);
  Write(set, kDev0);
  EXPECT_EQ(set.generation(), 2u);
  EXPECT_EQ(StateAt(set, kDev0), ReplicaState::kCurrent);
  EXPECT_EQ(StateAt(set, kHost), ReplicaState::kStale);
  EXPECT_EQ(StateAt(set, kPinned), ReplicaState::kStale);
  EXPECT_EQ(At(set.Replicas(), kDev0)->generation, 2u);
  EXPECT_EQ(At(set.Replicas(), kHost)->generation, 1u);
  EXPECT_THAT(set.SyncTargets(), ElementsAre(kHost, kPinned));
}

TEST(ReplicaSetTest, WrittenRefusals) {
  ReplicaSet set = Make(kHost);
  EXPECT_EQ(set.Written(kDev0).code(), absl::StatusCode::kNotFound);
  absl::Status nobody = set.Written(kHost);
  EXPECT_EQ(nobody.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(nobody.message(), HasSubstr("host has 0 writable leases"));
  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  absl::Status filling = set.Written(kDev0);
  EXPECT_EQ(filling.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(filling.message(), HasSubstr("device:0 is filling"));
  EXPECT_EQ(set.generation(), 1u);
}

TEST(ReplicaSetTest, LeaseRefusals) {
  ReplicaSet set = Make(kHost);
  EXPECT_EQ(set.AddReader(kDev0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(set.AddWriter(kDev0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(set.RemoveReader(kDev0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(set.RemoveWriter(kDev0).code(), absl::StatusCode::kNotFound);

  absl::Status no_reader = set.RemoveReader(kHost);
  EXPECT_EQ(no_reader.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(no_reader.message(), HasSubstr("host has 0 read leases to remove"));
  absl::Status no_writer = set.RemoveWriter(kHost);
  EXPECT_EQ(no_writer.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(no_writer.message(), HasSubstr("host has 0 writable leases to remove"));

  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  absl::Status filling_reader = set.AddReader(kDev0);
  EXPECT_EQ(filling_reader.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(filling_reader.message(),
              HasSubstr("device:0 is filling (generation 0, buffer at 1)"));
  EXPECT_EQ(set.AddWriter(kDev0).code(), absl::StatusCode::kFailedPrecondition);

  Fill(set, kDev1);
  Write(set, kHost);
  absl::Status stale_reader = set.AddReader(kDev1);
  EXPECT_EQ(stale_reader.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale_reader.message(), HasSubstr("device:1 is stale (generation 1, buffer at 2)"));
  absl::Status stale_writer = set.AddWriter(kDev1);
  EXPECT_EQ(stale_writer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale_writer.message(), HasSubstr("writers need a current replica"));

  ASSERT_TRUE(set.AddReader(kHost).ok());
  ASSERT_TRUE(set.AddReader(kHost).ok());
  absl::Status read = set.AddWriter(kHost);
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(read.message(), HasSubstr("host has 2 read leases"));
}

TEST(ReplicaSetTest, LeaseCountsAreReported) {
  ReplicaSet set = Make(kHost);
  ASSERT_TRUE(set.AddWriter(kHost).ok());
  ASSERT_TRUE(set.AddWriter(kHost).ok());  // Co-writers.
  EXPECT_EQ(At(set.Replicas(), kHost)->writers, 2u);
  ASSERT_TRUE(set.RemoveWriter(kHost).ok());
  ASSERT_TRUE(set.RemoveWriter(kHost).ok());
  ASSERT_TRUE(set.AddReader(kHost).ok());
  ASSERT_TRUE(set.AddReader(kHost).ok());
  ASSERT_TRUE(set.AddReader(kHost).ok());
  EXPECT_EQ(At(set.Replicas(), kHost)->readers, 3u);
  EXPECT_EQ(At(set.Replicas(), kHost)->writers, 0u);
}

TEST(ReplicaSetTest, DropRules) {
  ReplicaSet set = Make(kHost);
  EXPECT_EQ(set.Drop(kDev0).code(), absl::StatusCode::kNotFound);
  absl::Status only = set.Drop(kHost);
  EXPECT_EQ(only.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(only.message(), HasSubstr("host is the only current one (generation 1)"));

  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  absl::Status filling = set.Drop(kDev0);
  EXPECT_EQ(filling.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(filling.message(), HasSubstr("a fill of device:0 is running"));

  Fill(set, kDev1);
  ASSERT_TRUE(set.AddReader(kDev1).ok());
  absl::Status leased = set.Drop(kDev1);
  EXPECT_EQ(leased.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(leased.message(), HasSubstr("device:1 has 1 read and 0 writable leases"));
  ASSERT_TRUE(set.RemoveReader(kDev1).ok());

  // Current with another current: fine; so is a stale one nobody holds.
  ASSERT_TRUE(set.Drop(kHost).ok());
  ASSERT_TRUE(set.AddWriter(kDev1).ok());
  ASSERT_TRUE(set.Written(kDev1).ok());
  EXPECT_EQ(set.Drop(kDev1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(set.RemoveWriter(kDev1).ok());
  Fill(set, kHost);
  ASSERT_TRUE(set.AddWriter(kHost).ok());
  ASSERT_TRUE(set.Written(kHost).ok());
  ASSERT_TRUE(set.RemoveWriter(kHost).ok());
  ASSERT_EQ(StateAt(set, kDev1), ReplicaState::kStale);
  EXPECT_TRUE(set.Drop(kDev1).ok());
  // A stale replica held by readers is not dropped either.
  Fill(set, kPinned);
  ASSERT_TRUE(set.AddReader(kPinned).ok());
  Write(set, kHost);
  EXPECT_EQ(set.Drop(kPinned).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ReplicaSetTest, ReplicasAreReportedHostPinnedThenDevicesByOrdinal) {
  ReplicaSet set = Make(kDev2);
  Fill(set, kDev0);
  Fill(set, kHost);
  Fill(set, kPinned);
  Fill(set, kDev1);
  std::vector<Location> order;
  for (const ReplicaReport& r : set.Replicas()) order.push_back(r.location);
  EXPECT_THAT(order, ElementsAre(kHost, kPinned, kDev0, kDev1, kDev2));
}

// Every row of the state-word table.
TEST(ReplicaSetTest, StateWord) {
  struct Case {
    const char* what;
    std::vector<Location> replicas;  // The first is the primary.
    Location writer;                 // Written here afterwards, if wrote.
    bool wrote;
    std::vector<Location> refill;    // Refilled after the write.
    SyncState want;
  };
  const std::vector<Case> cases = {
      {"host alone", {kHost}, kHost, false, {}, SyncState::kHostOnly},
      {"host and pinned", {kHost, kPinned}, kHost, false, {}, SyncState::kHostOnly},
      {"host side, one stale", {kHost, kPinned}, kHost, true, {}, SyncState::kHostOnly},
      {"device alone", {kDev0}, kDev0, false, {}, SyncState::kDeviceOnly},
      {"two devices, one stale", {kDev0, kDev1}, kDev1, true, {}, SyncState::kDeviceOnly},
      {"both sides current", {kHost, kDev0}, kHost, false, {}, SyncState::kSynchronized},
      {"written on host", {kHost, kDev0}, kHost, true, {}, SyncState::kHostDirty},
      {"written on device", {kHost, kDev0}, kDev0, true, {}, SyncState::kDeviceDirty},
      {"pinned current, host stale, device stale", {kHost, kPinned, kDev0}, kPinned, true, {},
       SyncState::kHostDirty},
      {"written on device, one device refilled", {kHost, kDev0, kDev1}, kDev0, true, {kDev1},
       SyncState::kDeviceDirty},
      {"written on host, one device refilled", {kHost, kDev0, kDev1}, kHost, true, {kDev0},
       SyncState::kMixed},
      {"written on device, host refilled", {kHost, kPinned, kDev0}, kDev0, true, {kHost},
       SyncState::kMixed},
      {"written and all refilled", {kHost, kDev0, kDev1}, kDev1, true, {kHost, kDev0},
       SyncState::kSynchronized},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ReplicaSet set = Make(c.replicas[0]);
    for (std::size_t i = 1; i < c.replicas.size(); ++i) Fill(set, c.replicas[i]);
    if (c.wrote) Write(set, c.writer);
    for (const Location& at : c.refill) Fill(set, at);
    EXPECT_EQ(SyncStateName(set.State()), SyncStateName(c.want));
  }
}

TEST(ReplicaSetTest, AFillingReplicaCountsAsStaleInTheStateWord) {
  ReplicaSet set = Make(kHost);
  ASSERT_TRUE(set.BeginFill(kDev0).ok());
  EXPECT_EQ(set.State(), SyncState::kHostDirty);
}

TEST(ReplicaSetTest, Names) {
  EXPECT_EQ(ReplicaStateName(ReplicaState::kCurrent), "current");
  EXPECT_EQ(ReplicaStateName(ReplicaState::kStale), "stale");
  EXPECT_EQ(ReplicaStateName(ReplicaState::kFilling), "filling");
  EXPECT_EQ(SyncStateName(SyncState::kHostOnly), "host_only");
  EXPECT_EQ(SyncStateName(SyncState::kDeviceOnly), "device_only");
  EXPECT_EQ(SyncStateName(SyncState::kSynchronized), "synchronized");
  EXPECT_EQ(SyncStateName(SyncState::kHostDirty), "host_dirty");
  EXPECT_EQ(SyncStateName(SyncState::kDeviceDirty), "device_dirty");
  EXPECT_EQ(SyncStateName(SyncState::kMixed), "mixed");
}

// A seeded walk over random operations. Each step either succeeds or is
// refused with the code a model of the rules predicts; the invariants hold
// after every step.
TEST(ReplicaSetTest, RandomWalkKeepsTheInvariants) {
  const std::vector<Location> places = {kHost, kPinned, kDev0, kDev1, kDev2};
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    ReplicaSet set = Make(places[seed % places.size()], 4);
    std::vector<FillTicket> running;
    for (int step = 0; step < 400; ++step) {
      const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      const Location at = places[rng() % places.size()];
      const std::vector<ReplicaReport> before = set.Replicas();
      const ReplicaReport* r = At(before, at);
      const Generation gen = set.generation();
      switch (rng() % 9) {
        case 0: {  // Open: plan, then act on the plan as the broker would.
          absl::StatusOr<OpenPlan> plan = set.PlanOpen(at, rng() % 2 == 0);
          if (!plan.ok()) {
            EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << where;
            EXPECT_EQ(r, nullptr) << where;
            EXPECT_EQ(set.size(), set.max_replicas()) << where;
            break;
          }
          if (plan->action == OpenPlan::Action::kFill) {
            absl::StatusOr<FillTicket> t = set.BeginFill(at);
            ASSERT_TRUE(t.ok()) << where << ": " << t.status();
            EXPECT_EQ(t->source, *plan->source) << where;
            EXPECT_EQ(t->generation, gen) << where;
            EXPECT_EQ(t->created, r == nullptr) << where;
            running.push_back(*t);
          } else if (plan->action == OpenPlan::Action::kServe) {
            EXPECT_EQ(r->state, ReplicaState::kCurrent) << where;
          } else if (plan->action == OpenPlan::Action::kWait) {
            EXPECT_EQ(r->state, ReplicaState::kFilling) << where;
          } else {
            EXPECT_GT(r->readers + r->writers, 0u) << where;
          }
          break;
        }
        case 1: {  // Finish a running fill, sometimes failing.
          if (running.empty()) break;
          const std::size_t i = rng() % running.size();
          const FillTicket t = running[i];
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
          const bool fail = rng() % 4 == 0;
          absl::StatusOr<FillResult> result =
              set.FinishFill(t, fail ? absl::InternalError("injected") : absl::OkStatus());
          ASSERT_TRUE(result.ok()) << where << ": " << result.status();
          if (fail) {
            EXPECT_EQ(*result, t.created ? FillResult::kRemoved : FillResult::kStaleAgain)
                << where;
            EXPECT_EQ(set.last_failure()->at, t.at) << where;
          } else {
            EXPECT_EQ(*result, t.generation == gen ? FillResult::kCurrent : FillResult::kOutdated)
                << where;
          }
          break;
        }
        case 2: {
          absl::Status s = set.AddReader(at);
          const bool ok = r != nullptr && r->state == ReplicaState::kCurrent;
          EXPECT_EQ(s.ok(), ok) << where << ": " << s;
          break;
        }
        case 3: {
          absl::Status s = set.RemoveReader(at);
          EXPECT_EQ(s.ok(), r != nullptr && r->readers > 0) << where << ": " << s;
          if (r != nullptr && r->readers == 0) {
            EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
          }
          break;
        }
        case 4: {
          absl::Status s = set.AddWriter(at);
          const bool ok = r != nullptr && r->state == ReplicaState::kCurrent && r->readers == 0;
          EXPECT_EQ(s.ok(), ok) << where << ": " << s;
          break;
        }
        case 5: {
          absl::Status s = set.RemoveWriter(at);
          EXPECT_EQ(s.ok(), r != nullptr && r->writers > 0) << where << ": " << s;
          break;
        }
        case 6: {
          absl::Status s = set.Written(at);
          const bool ok = r != nullptr && r->state == ReplicaState::kCurrent && r->writers > 0;
          EXPECT_EQ(s.ok(), ok) << where << ": " << s;
          EXPECT_EQ(set.generation(), ok ? gen + 1 : gen) << where;
          break;
        }
        case 7: {  // Sync: start every fill it names; each must begin.
          for (const Location& target : set.SyncTargets()) {
            absl::StatusOr<FillTicket> t = set.BeginFill(target);
            ASSERT_TRUE(t.ok()) << where << ": " << t.status();
            running.push_back(*t);
          }
          break;
        }
        case 8: {
          absl::Status s = set.Drop(at);
          std::size_t current = 0;
          for (const ReplicaReport& x : before) current += x.state == ReplicaState::kCurrent;
          const bool ok = r != nullptr && r->readers == 0 && r->writers == 0 &&
                          r->state != ReplicaState::kFilling &&
                          !(r->state == ReplicaState::kCurrent && current == 1);
          EXPECT_EQ(s.ok(), ok) << where << ": " << s;
          if (r == nullptr) {
            EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << where;
          }
          break;
        }
      }
      CheckInvariants(set, where);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace memd::broker
