// The scheduler and range order alone, with times the test chooses.

#include <vector>

#include "daemon/transfer/range_order.h"
#include "daemon/transfer/scheduler.h"
#include "gtest/gtest.h"

namespace memd::transfer {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// EngineOptions::max_critical_run's default.
constexpr int kCriticalRun = 3;
constexpr uid_t kAlice = 61001;
constexpr uid_t kMallory = 61003;

RecordPtr Record(TransferId id, Priority priority, absl::Time since, std::uint64_t bytes = 4 * kMiB,
                 uid_t uid = 0) {
  auto record = std::make_shared<TransferRecord>();
  record->id = id;
  record->uid = uid;
  record->priority = priority;
  record->chunk_bytes = kMiB;
  record->source.length = bytes;
  record->destination.length = bytes;
  record->waiting_since = since;
  return record;
}

bool Any(const TransferRecord&) { return true; }

TEST(SchedulerTest, CriticalBeforeNormalBeforeBackground) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  scheduler.Add(Record(1, Priority::kBackground, t0));
  scheduler.Add(Record(2, Priority::kNormal, t0));
  scheduler.Add(Record(3, Priority::kCritical, t0));
  EXPECT_EQ(scheduler.Next(t0, Any)->record->id, 3u);
}

TEST(SchedulerTest, EqualClassesTakeTurnsChunkByChunk) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  scheduler.Add(Record(1, Priority::kNormal, t0));
  scheduler.Add(Record(2, Priority::kNormal, t0));
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(1), Any)->record->id, 1u);
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(2), Any)->record->id, 2u);
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(3), Any)->record->id, 1u);
}

TEST(SchedulerTest, AWaitingBackgroundTransferRisesOneClassPerAgeingPeriod) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  RecordPtr background = Record(1, Priority::kBackground, t0);
  scheduler.Add(background);
  EXPECT_EQ(scheduler.EffectiveClass(*background, t0 + absl::Milliseconds(199)), 2);
  EXPECT_EQ(scheduler.EffectiveClass(*background, t0 + absl::Milliseconds(200)), 1);
  EXPECT_EQ(scheduler.EffectiveClass(*background, t0 + absl::Milliseconds(400)), 0);
  // A critical transfer that arrived later loses to the aged one.
  scheduler.Add(Record(2, Priority::kCritical, t0 + absl::Milliseconds(300)));
  EXPECT_EQ(scheduler.Next(t0 + absl::Milliseconds(400), Any)->record->id, 1u);
  // Served, it waits from now on and falls back to its class.
  EXPECT_EQ(scheduler.Next(t0 + absl::Milliseconds(401), Any)->record->id, 2u);
}

TEST(SchedulerTest, ChunksCoverTheTransferAndRetriesComeFirstWhenDue) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  RecordPtr record = Record(1, Priority::kNormal, t0, 2 * kMiB + 5);
  scheduler.Add(record);
  auto first = scheduler.Next(t0, Any);
  auto second = scheduler.Next(t0, Any);
  record->redo.push_back(ChunkRedo{first->offset, first->bytes, 1, t0 + absl::Seconds(1)});
  auto third = scheduler.Next(t0, Any);
  EXPECT_EQ(third->offset, 2 * kMiB);
  EXPECT_EQ(third->bytes, 5u);
  EXPECT_FALSE(scheduler.Next(t0, Any).has_value()) << "the retry is not due yet";
  EXPECT_EQ(scheduler.NextRetry(), t0 + absl::Seconds(1));
  auto retry = scheduler.Next(t0 + absl::Seconds(1), Any);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->offset, 0u);
  EXPECT_EQ(retry->attempt, 1);
  EXPECT_EQ(record->in_flight, 4);
  (void)second;
}

TEST(SchedulerTest, BlockedCancelledAndUnfittingTransfersArePassedOver) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  RecordPtr blocked = Record(1, Priority::kCritical, t0);
  blocked->blockers = 1;
  RecordPtr cancelled = Record(2, Priority::kCritical, t0);
  cancelled->cancel_requested = true;
  RecordPtr unfitting = Record(3, Priority::kCritical, t0);
  scheduler.Add(blocked);
  scheduler.Add(cancelled);
  scheduler.Add(unfitting);
  scheduler.Add(Record(4, Priority::kBackground, t0));
  auto next = scheduler.Next(t0, [](const TransferRecord& r) { return r.id != 3; });
  EXPECT_EQ(next->record->id, 4u);
}

// The ids of the next `turns` chunks, one microsecond apart (far below the
// ageing period: classes stay as they are).
std::vector<TransferId> Turns(Scheduler& scheduler, absl::Time& now, int turns,
                              absl::FunctionRef<bool(const TransferRecord&)> fits = Any) {
  std::vector<TransferId> ids;
  for (int i = 0; i < turns; ++i) {
    now += absl::Microseconds(1);
    auto chunk = scheduler.Next(now, fits);
    ids.push_back(chunk ? chunk->record->id : 0);
  }
  return ids;
}

// Issue 22, finding 3: turns went by waiting time per transfer, so a uid
// with 64 runnable copies took 64 turns for another's one.
TEST(SchedulerTest, UidsTakeTurnsWithinAClassWhateverTheirNumberOfTransfers) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  for (TransferId id = 1; id <= 4; ++id) {
    scheduler.Add(Record(id, Priority::kNormal, t0, 64 * kMiB, kMallory));
  }
  scheduler.Add(Record(5, Priority::kNormal, t0 + absl::Microseconds(1), 64 * kMiB, kAlice));
  absl::Time now = t0 + absl::Microseconds(10);
  // Neither uid was served: the longest waiting goes first. Then the uids
  // alternate, and mallory's transfers take turns among themselves.
  EXPECT_EQ(Turns(scheduler, now, 8), (std::vector<TransferId>{1, 5, 2, 5, 3, 5, 4, 5}));
}

TEST(SchedulerTest, AUidNewToTheLaneIsServedNextInItsClass) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  for (TransferId id = 1; id <= 4; ++id) {
    scheduler.Add(Record(id, Priority::kCritical, t0, 64 * kMiB, kMallory));
  }
  absl::Time now = t0;
  EXPECT_EQ(Turns(scheduler, now, 3), (std::vector<TransferId>{1, 2, 3}));
  // Alice arrives after transfer 4 has waited for three turns: she goes
  // first all the same, then mallory's turn resumes where it was.
  scheduler.Add(Record(5, Priority::kCritical, now, kMiB, kAlice));
  EXPECT_EQ(Turns(scheduler, now, 3), (std::vector<TransferId>{5, 4, 1}));
}

TEST(SchedulerTest, CriticalTakesAtMostThreeOfEveryFourTurnsWhileOthersCanMove) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  scheduler.Add(Record(1, Priority::kCritical, t0, 64 * kMiB, kMallory));
  scheduler.Add(Record(2, Priority::kCritical, t0, 64 * kMiB, kMallory));
  scheduler.Add(Record(3, Priority::kNormal, t0, 64 * kMiB, kAlice));
  absl::Time now = t0;
  EXPECT_EQ(Turns(scheduler, now, 12),
            (std::vector<TransferId>{1, 2, 1, 3, 2, 1, 2, 3, 1, 2, 1, 3}));
}

TEST(SchedulerTest, CriticalTakesEveryTurnWhenNothingElseCanMove) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), kCriticalRun);
  scheduler.Add(Record(1, Priority::kCritical, t0, 64 * kMiB, kMallory));
  RecordPtr blocked = Record(2, Priority::kNormal, t0, 64 * kMiB, kAlice);
  blocked->blockers = 1;
  scheduler.Add(blocked);
  scheduler.Add(Record(3, Priority::kBackground, t0, 64 * kMiB, kAlice));
  absl::Time now = t0;
  // The background transfer does not fit (a lane keeps its last slot for
  // critical copies): only what could move counts.
  EXPECT_EQ(Turns(scheduler, now, 5, [](const TransferRecord& r) { return r.id != 3; }),
            (std::vector<TransferId>{1, 1, 1, 1, 1}));
  // Once it fits, every fourth turn is its.
  EXPECT_EQ(Turns(scheduler, now, 8), (std::vector<TransferId>{1, 1, 1, 3, 1, 1, 1, 3}));
}

TEST(SchedulerTest, TheTurnCriticalLeavesGoesToTheBestOfTheOthers) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200), 1);
  scheduler.Add(Record(1, Priority::kCritical, t0, 64 * kMiB, kMallory));
  scheduler.Add(Record(2, Priority::kBackground, t0, 64 * kMiB, kAlice));
  scheduler.Add(Record(3, Priority::kNormal, t0 + absl::Microseconds(1), 64 * kMiB, kAlice));
  absl::Time now = t0 + absl::Microseconds(1);
  // A run of one: critical every other turn; normal before background.
  EXPECT_EQ(Turns(scheduler, now, 6), (std::vector<TransferId>{1, 3, 1, 3, 1, 3}));
}

TEST(RangeOrderTest, WritersWaitForEarlierOverlapsReadersOnlyForWriters) {
  RangeOrder order;
  const auto make = [](TransferId id, std::uint64_t src_buffer, std::uint64_t src_offset,
                       std::uint64_t dst_buffer, std::uint64_t dst_offset) {
    auto record = std::make_shared<TransferRecord>();
    record->id = id;
    record->source.length = record->destination.length = 100;
    record->source.buffer_id = src_buffer;
    record->source.offset = src_offset;
    record->destination.buffer_id = dst_buffer;
    record->destination.offset = dst_offset;
    return record;
  };
  RecordPtr write = make(1, 10, 0, 20, 0);         // Reads 10, writes 20[0,100).
  RecordPtr reader = make(2, 10, 50, 30, 0);       // Reads 10 too: no conflict.
  RecordPtr overlap = make(3, 40, 0, 20, 99);      // Writes 20[99,199): after 1.
  RecordPtr read_back = make(4, 20, 150, 50, 0);   // Reads 20[150,250): after 3.
  RecordPtr apart = make(5, 60, 0, 20, 300);       // Writes 20[300,400): free.
  for (const RecordPtr& record : {write, reader, overlap, read_back, apart}) order.Admit(record);
  EXPECT_EQ(write->blockers, 0);
  EXPECT_EQ(reader->blockers, 0);
  EXPECT_EQ(overlap->blockers, 1);
  EXPECT_EQ(read_back->blockers, 1);
  EXPECT_EQ(apart->blockers, 0);
  auto released = order.Release(*write);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0]->id, 3u);
  released = order.Release(*overlap);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0]->id, 4u);
}

TEST(RangeOrderTest, EndpointsWithoutABufferOrderNothing) {
  RangeOrder order;
  auto a = std::make_shared<TransferRecord>();
  a->destination.length = 10;
  auto b = std::make_shared<TransferRecord>();
  b->destination.length = 10;
  order.Admit(a);
  order.Admit(b);
  EXPECT_EQ(b->blockers, 0);
}

}  // namespace
}  // namespace memd::transfer
