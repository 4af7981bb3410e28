// The scheduler and range order alone, with times the test chooses.

#include "daemon/transfer/range_order.h"
#include "daemon/transfer/scheduler.h"
#include "gtest/gtest.h"

namespace memd::transfer {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

RecordPtr Record(TransferId id, Priority priority, absl::Time since, std::uint64_t bytes = 4 * kMiB) {
  auto record = std::make_shared<TransferRecord>();
  record->id = id;
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
  Scheduler scheduler(absl::Milliseconds(200));
  scheduler.Add(Record(1, Priority::kBackground, t0));
  scheduler.Add(Record(2, Priority::kNormal, t0));
  scheduler.Add(Record(3, Priority::kCritical, t0));
  EXPECT_EQ(scheduler.Next(t0, Any)->record->id, 3u);
}

TEST(SchedulerTest, EqualClassesTakeTurnsChunkByChunk) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200));
  scheduler.Add(Record(1, Priority::kNormal, t0));
  scheduler.Add(Record(2, Priority::kNormal, t0));
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(1), Any)->record->id, 1u);
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(2), Any)->record->id, 2u);
  EXPECT_EQ(scheduler.Next(t0 + absl::Microseconds(3), Any)->record->id, 1u);
}

TEST(SchedulerTest, AWaitingBackgroundTransferRisesOneClassPerAgeingPeriod) {
  const absl::Time t0 = absl::UnixEpoch();
  Scheduler scheduler(absl::Milliseconds(200));
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
  Scheduler scheduler(absl::Milliseconds(200));
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
  Scheduler scheduler(absl::Milliseconds(200));
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
