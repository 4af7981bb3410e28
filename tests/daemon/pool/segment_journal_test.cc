// CarvingPool tells its SegmentJournal of every segment it reserves, moves
// and gives back, in the order a durable record needs.

#include <sys/stat.h>

#include <string>
#include <vector>

#include "daemon/backend/host/host_backend.h"
#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/pool/recording_journal.h"
#include "tests/support/fake_clock.h"

namespace memd::pool {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr std::uint64_t kMiB = 1 << 20;
const Domain kAlice{1000, 100, 0600};
const Domain kBob{1001, 100, 0600};

std::string Added(std::uint64_t id) { return "added " + std::to_string(id); }
std::string Changed(std::uint64_t id) { return "changed " + std::to_string(id); }
std::string Removed(std::uint64_t id) { return "removed " + std::to_string(id); }

class SegmentJournalTest : public ::testing::Test {
 protected:
  std::unique_ptr<CarvingPool> MakePool(CarvingPoolOptions options = {}) {
    options.journal = &journal_;
    return std::make_unique<CarvingPool>(backend_, Location::Host(), options, clock_);
  }
  Allocation Allocate(Pool& pool, std::uint64_t bytes, Domain domain = kAlice) {
    auto allocation = pool.Allocate(bytes, domain);
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    return allocation.ok() ? std::move(*allocation) : Allocation{};
  }

  test::FakeClock clock_;
  backend::HostBackend backend_;
  test::RecordingJournal journal_;
};

TEST_F(SegmentJournalTest, ReservedSegmentsAreAddedWithTheirRecordAndDescriptor) {
  auto pool = MakePool();
  Allocation small = Allocate(*pool, 4096);
  // Added before Allocate returned: before the allocation was handed out.
  EXPECT_THAT(journal_.events(), ElementsAre(Added(small.segment_id)));
  Allocation large = Allocate(*pool, 3 * kMiB, kBob);
  EXPECT_THAT(journal_.events(),
              ElementsAre(Added(small.segment_id), Added(large.segment_id)));
  // A hit reserves nothing and records nothing.
  Allocation again = Allocate(*pool, 4096);
  EXPECT_EQ(journal_.events().size(), 2u);

  const std::vector<SegmentRecord> records = journal_.records();
  ASSERT_EQ(records.size(), 2u);
  const SegmentRecord& first = records[0].id == small.segment_id ? records[0] : records[1];
  const SegmentRecord& second = records[0].id == small.segment_id ? records[1] : records[0];
  EXPECT_EQ(first.location, Location::Host());
  EXPECT_TRUE(first.small);
  EXPECT_EQ(first.bytes, small.segment_bytes());
  EXPECT_EQ(first.domain, kAlice);
  EXPECT_FALSE(second.small);
  EXPECT_EQ(second.bytes, 3 * kMiB);
  EXPECT_EQ(second.domain, kBob);
  // The descriptor is the segment's memory: same size, same bytes.
  UniqueFd fd = journal_.DupFd(large.segment_id);
  ASSERT_TRUE(fd.valid());
  struct stat info;
  ASSERT_EQ(::fstat(fd.get(), &info), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), 3 * kMiB);
  auto handle = large.Export(Access::kReadWrite);
  ASSERT_TRUE(handle.ok());
  struct stat exported;
  ASSERT_EQ(::fstat(handle->fd, &exported), 0);
  EXPECT_EQ(info.st_ino, exported.st_ino);

  for (Allocation* allocation : {&small, &large, &again}) pool->Free(std::move(*allocation));
}

TEST_F(SegmentJournalTest, TrimRemovesAfterTheSegmentLeftThePool) {
  auto pool = MakePool();
  Allocation small = Allocate(*pool, 4096);
  Allocation large = Allocate(*pool, 3 * kMiB);
  pool->Free(std::move(small));
  pool->Free(std::move(large));
  const std::uint64_t trimmed = pool->Trim(absl::ZeroDuration());
  EXPECT_EQ(trimmed, pool->Stats().trimmed_bytes);
  EXPECT_EQ(pool->Stats().segments, 0u);
  std::vector<std::string> events = journal_.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(events.begin() + 2, events.end()),
              ::testing::UnorderedElementsAre(Removed(small.segment_id),
                                              Removed(large.segment_id)));
  EXPECT_THAT(journal_.records(), IsEmpty());
}

TEST_F(SegmentJournalTest, TheIdleBudgetRemovesBeforeTheNextSegmentIsAdded) {
  CarvingPoolOptions options;
  options.idle_budget = 0;
  auto pool = MakePool(options);
  Allocation first = Allocate(*pool, 3 * kMiB);
  const std::uint64_t first_id = first.segment_id;
  pool->Free(std::move(first));
  // 8 MiB does not fit the idle 3 MiB segment, and holding both would
  // exceed the budget: it goes back first.
  Allocation second = Allocate(*pool, 8 * kMiB);
  EXPECT_THAT(journal_.events(),
              ElementsAre(Added(first_id), Removed(first_id), Added(second.segment_id)));
  pool->Free(std::move(second));
}

TEST_F(SegmentJournalTest, ASegmentScrubbedForAnotherDomainIsChanged) {
  CarvingPoolOptions options;
  options.scrub_between_domains = true;
  auto pool = MakePool(options);
  Allocation alice = Allocate(*pool, 3 * kMiB, kAlice);
  const std::uint64_t id = alice.segment_id;
  pool->Free(std::move(alice));
  Allocation bob = Allocate(*pool, 3 * kMiB, kBob);
  ASSERT_EQ(bob.segment_id, id) << "Bob was to get Alice's idle segment";
  EXPECT_THAT(journal_.events(), ElementsAre(Added(id), Changed(id)));
  ASSERT_EQ(journal_.records().size(), 1u);
  EXPECT_EQ(journal_.records()[0].domain, kBob);
  pool->Free(std::move(bob));
}

TEST_F(SegmentJournalTest, AtTheLimitIdleSegmentsAreRemovedToMakeRoom) {
  CarvingPoolOptions options;
  options.limit_bytes = 4 * kMiB;
  options.idle_budget = -1;  // Only the limit gives memory back.
  auto pool = MakePool(options);
  Allocation first = Allocate(*pool, 3 * kMiB);
  const std::uint64_t first_id = first.segment_id;
  pool->Free(std::move(first));
  Allocation second = Allocate(*pool, 4 * kMiB);
  EXPECT_THAT(journal_.events(),
              ElementsAre(Added(first_id), Removed(first_id), Added(second.segment_id)));
  pool->Free(std::move(second));
}

TEST_F(SegmentJournalTest, DestroyingThePoolRemovesNothing) {
  {
    auto pool = MakePool();
    Allocation allocation = Allocate(*pool, 3 * kMiB);
    pool->Free(std::move(allocation));
  }
  EXPECT_EQ(journal_.events().size(), 1u);
  EXPECT_EQ(journal_.records().size(), 1u);
}

}  // namespace
}  // namespace memd::pool
