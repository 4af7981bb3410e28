// CarvingPool::Adopt: a second pool takes back the segments a first one
// reserved (the same memfds, through dup'd descriptors as a restarted memd
// receives them) with the live allocations, and agrees with it.

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/backend/host/host_backend.h"
#include "daemon/pool/carving_pool.h"
#include "daemon/pool/tracing_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/pool/recording_journal.h"
#include "tests/support/fake_clock.h"

namespace memd::pool {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
const Domain kAlice{1000, 100, 0600};
const Domain kBob{1001, 100, 0600};

// Fills an allocation with a pattern naming it; Holds checks it.
void Fill(const Allocation& allocation, char tag) {
  auto memory = allocation.Memory();
  ASSERT_TRUE(memory.ok()) << memory.status();
  std::memset(memory->host, tag, allocation.bytes);
}
bool Holds(const Allocation& allocation, char tag) {
  auto memory = allocation.Memory();
  if (!memory.ok()) return false;
  for (std::uint64_t i = 0; i < allocation.bytes; i += 512) {
    if (memory->host[i] != static_cast<std::byte>(tag)) return false;
  }
  return memory->host[allocation.bytes - 1] == static_cast<std::byte>(tag);
}

class CarvingPoolAdoptTest : public ::testing::Test {
 protected:
  std::unique_ptr<CarvingPool> MakePool(CarvingPoolOptions options = {},
                                        test::RecordingJournal* journal = nullptr) {
    options.journal = journal;
    return std::make_unique<CarvingPool>(backend_, Location::Host(), options, clock_);
  }
  Allocation Allocate(Pool& pool, std::uint64_t bytes, Domain domain = kAlice) {
    auto allocation = pool.Allocate(bytes, domain);
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    return allocation.ok() ? std::move(*allocation) : Allocation{};
  }
  // A host segment of `bytes` to adopt.
  std::shared_ptr<backend::Segment> Segment(std::uint64_t bytes) {
    auto segment = backend_.Reserve(Location::Host(), bytes);
    EXPECT_TRUE(segment.ok()) << segment.status();
    return segment.ok() ? std::shared_ptr<backend::Segment>(std::move(*segment)) : nullptr;
  }
  // What a restarted memd would adopt into a new pool: every segment the
  // journal holds, its memfd adopted by the host backend from a dup of the
  // stored descriptor, with the live allocations in it (`live`, the first
  // pool's). Returns the adopted allocations by (segment, offset).
  std::map<std::pair<std::uint64_t, std::uint64_t>, Allocation> AdoptAll(
      Pool& pool, const test::RecordingJournal& journal,
      const std::vector<const Allocation*>& live) {
    std::map<std::pair<std::uint64_t, std::uint64_t>, Allocation> adopted;
    for (const SegmentRecord& record : journal.records()) {
      auto memory = backend_.Adopt(record.location, record.bytes, journal.DupFd(record.id));
      EXPECT_TRUE(memory.ok()) << memory.status();
      if (!memory.ok()) continue;
      AdoptedSegment segment{.id = record.id,
                             .small = record.small,
                             .domain = record.domain,
                             .segment = std::move(*memory)};
      for (const Allocation* allocation : live) {
        if (allocation->segment_id == record.id) {
          segment.live.emplace_back(allocation->offset, allocation->bytes);
        }
      }
      auto allocations = pool.Adopt(std::move(segment));
      EXPECT_TRUE(allocations.ok()) << allocations.status();
      if (!allocations.ok()) continue;
      for (Allocation& allocation : *allocations) {
        const auto key = std::make_pair(allocation.segment_id, allocation.offset);
        adopted.emplace(key, std::move(allocation));
      }
    }
    return adopted;
  }

  test::FakeClock clock_;
  backend::HostBackend backend_;
};

TEST_F(CarvingPoolAdoptTest, AdoptingPoolAgreesWithTheOneBeforeAndKeepsWorking) {
  test::RecordingJournal journal;
  CarvingPoolOptions options;
  options.large_fit_slack = 4;  // Carve two large blocks from one segment.
  options.idle_budget = -1;     // Keep idle segments: both pools alike.
  auto before = MakePool(options, &journal);
  // Small blocks of several classes, large blocks with gaps between them,
  // two domains; nothing small freed (see the next test for that).
  std::vector<Allocation> live;
  for (std::uint64_t bytes : {kPage, 3 * kPage, 70 * kPage / 4, kPage, 50 * kPage}) {
    live.push_back(Allocate(*before, bytes));
  }
  live.push_back(Allocate(*before, 5 * kPage, kBob));
  std::vector<Allocation> large;
  for (int i = 0; i < 4; ++i) large.push_back(Allocate(*before, 2 * kMiB));
  // Two large blocks of one segment: freed whole, carved again in two.
  Allocation big = Allocate(*before, 6 * kMiB, kBob);
  const std::uint64_t big_segment = big.segment_id;
  before->Free(std::move(big));
  live.push_back(Allocate(*before, 2 * kMiB + kPage, kBob));
  live.push_back(Allocate(*before, 2 * kMiB, kBob));
  for (std::size_t i = 0; i < large.size(); ++i) {
    if (i % 2 == 0) {
      before->Free(std::move(large[i]));
    } else {
      live.push_back(std::move(large[i]));
    }
  }
  EXPECT_EQ(live[live.size() - 4].segment_id, big_segment);
  for (std::size_t i = 0; i < live.size(); ++i) Fill(live[i], static_cast<char>('a' + i));

  std::vector<const Allocation*> pointers;
  for (const Allocation& allocation : live) pointers.push_back(&allocation);
  auto after = MakePool(options);  // A restarted memd's pool.
  auto adopted = AdoptAll(*after, journal, pointers);
  ASSERT_EQ(adopted.size(), live.size());

  // The same allocations, the same memory.
  for (std::size_t i = 0; i < live.size(); ++i) {
    auto it = adopted.find({live[i].segment_id, live[i].offset});
    ASSERT_NE(it, adopted.end()) << i;
    const Allocation& allocation = it->second;
    EXPECT_EQ(allocation.bytes, live[i].bytes);
    EXPECT_EQ(allocation.domain, live[i].domain);
    EXPECT_EQ(allocation.segment_bytes(), live[i].segment_bytes());
    EXPECT_TRUE(Holds(allocation, static_cast<char>('a' + i))) << i;
    auto handle = allocation.Export(Access::kReadWrite);
    ASSERT_TRUE(handle.ok());
    EXPECT_EQ(handle->type, HandleType::kHostMemfd);
    EXPECT_GT(allocation.Hold().use_count(), 1);
  }

  // The pools agree: reserved, used, free, segments, and (no small block
  // freed) the largest free block.
  const PoolStats was = before->Stats();
  const PoolStats is = after->Stats();
  EXPECT_EQ(is.reserved_bytes, was.reserved_bytes);
  EXPECT_EQ(is.used_bytes, was.used_bytes);
  EXPECT_EQ(is.free_bytes(), was.free_bytes());
  EXPECT_EQ(is.segments, was.segments);
  EXPECT_EQ(is.largest_free_bytes, was.largest_free_bytes);
  EXPECT_DOUBLE_EQ(is.fragmentation(), was.fragmentation());
  EXPECT_EQ(is.peak_used_bytes, is.used_bytes);  // History starts here.
  EXPECT_EQ(is.hit_count + is.miss_count, 0u);
  ASSERT_EQ(is.size_classes.size(), was.size_classes.size());
  for (std::size_t i = 0; i < is.size_classes.size(); ++i) {
    EXPECT_EQ(is.size_classes[i].cached, 0u);
  }

  // Both keep working alike, and new memory never overlaps adopted memory.
  std::vector<Allocation> more, more_before;
  for (std::uint64_t bytes : {kPage, 3 * kPage, 70 * kPage / 4, 2 * kMiB, 384 * kPage}) {
    Allocation in_before = Allocate(*before, bytes);
    Allocation in_after = Allocate(*after, bytes);
    EXPECT_EQ(in_after.segment_id, in_before.segment_id) << bytes;
    EXPECT_EQ(in_after.offset, in_before.offset) << bytes;
    Fill(in_after, 'Z');
    more_before.push_back(std::move(in_before));
    more.push_back(std::move(in_after));
  }
  EXPECT_EQ(after->Stats().reserved_bytes, before->Stats().reserved_bytes);
  EXPECT_EQ(after->Stats().largest_free_bytes, before->Stats().largest_free_bytes);
  for (std::size_t i = 0; i < live.size(); ++i) {
    EXPECT_TRUE(Holds(adopted.at({live[i].segment_id, live[i].offset}),
                      static_cast<char>('a' + i)))
        << i;
  }
  for (const Allocation& allocation : more) EXPECT_TRUE(Holds(allocation, 'Z'));

  // Freeing everything leaves both pools idle and trimmable to nothing.
  for (Allocation& allocation : more) after->Free(std::move(allocation));
  for (auto& [key, allocation] : adopted) after->Free(std::move(allocation));
  for (Allocation& allocation : live) before->Free(std::move(allocation));
  for (Allocation& allocation : more_before) before->Free(std::move(allocation));
  EXPECT_EQ(after->Stats().used_bytes, 0u);
  after->Trim(absl::ZeroDuration());
  EXPECT_EQ(after->Stats().segments, 0u);
  EXPECT_EQ(after->Stats().reserved_bytes, 0u);
}

TEST_F(CarvingPoolAdoptTest, CachedSmallBlocksComeBackAsCarvableFreeSpace) {
  test::RecordingJournal journal;
  auto before = MakePool({}, &journal);
  std::vector<Allocation> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(Allocate(*before, kPage));
  // Freed small blocks wait in their class's cache: not free space.
  before->Free(std::move(blocks[1]));
  before->Free(std::move(blocks[2]));
  std::vector<const Allocation*> live = {&blocks[0], &blocks[3], &blocks[4], &blocks[5]};

  auto after = MakePool();
  auto adopted = AdoptAll(*after, journal, live);
  ASSERT_EQ(adopted.size(), 4u);
  const PoolStats was = before->Stats();
  const PoolStats is = after->Stats();
  // Exactly the same: bytes and segments.
  EXPECT_EQ(is.reserved_bytes, was.reserved_bytes);
  EXPECT_EQ(is.used_bytes, was.used_bytes);
  EXPECT_EQ(is.free_bytes(), was.free_bytes());
  EXPECT_EQ(is.segments, was.segments);
  // Not the same: the two cached pages are one free block now.
  EXPECT_EQ(was.size_classes[0].cached, 2u);
  EXPECT_EQ(is.size_classes[0].cached, 0u);
  EXPECT_EQ(is.size_classes[0].allocations, 4u);  // The adopted live ones.
  EXPECT_GE(is.largest_free_bytes, was.largest_free_bytes);
  // Two pages fit the hole the cache held apart.
  Allocation two = Allocate(*after, 2 * kPage);
  EXPECT_EQ(two.segment_id, blocks[0].segment_id);
  EXPECT_EQ(two.offset, blocks[0].offset + kPage);

  after->Free(std::move(two));
  for (auto& [key, allocation] : adopted) after->Free(std::move(allocation));
  for (const Allocation* allocation : live) {
    before->Free(std::move(*const_cast<Allocation*>(allocation)));
  }
}

TEST_F(CarvingPoolAdoptTest, AdoptedIdsAreNeverGivenToNewSegments) {
  auto pool = MakePool();
  Allocation probe = Allocate(*pool, 3 * kMiB);
  const std::uint64_t far = probe.segment_id + 1000;
  pool->Free(std::move(probe));
  auto adopted = pool->Adopt({.id = far, .domain = kAlice, .segment = Segment(2 * kMiB)});
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_THAT(*adopted, IsEmpty());
  Allocation fresh = Allocate(*pool, 8 * kMiB);
  EXPECT_GT(fresh.segment_id, far);
  // An idle adopted segment is idle like any: trimmed with the rest.
  pool->Free(std::move(fresh));
  pool->Trim(absl::ZeroDuration());
  EXPECT_EQ(pool->Stats().segments, 0u);
}

TEST_F(CarvingPoolAdoptTest, AdoptedSegmentsAreNotReportedToTheJournal) {
  test::RecordingJournal journal;
  auto pool = MakePool({}, &journal);
  auto adopted = pool->Adopt({.id = 1u << 30,
                              .domain = kAlice,
                              .segment = Segment(2 * kMiB),
                              .live = {{0, kMiB}}});
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_THAT(journal.events(), IsEmpty());
  // Giving it back is reported: the journal's owner drops its record.
  pool->Free(std::move((*adopted)[0]));
  pool->Trim(absl::ZeroDuration());
  EXPECT_THAT(journal.events(), ::testing::ElementsAre("removed " + std::to_string(1u << 30)));
}

TEST_F(CarvingPoolAdoptTest, LiveAllocationsComeBackInTheCallersOrder) {
  auto pool = MakePool();
  auto adopted = pool->Adopt({.id = 1u << 29,
                              .small = true,
                              .domain = kBob,
                              .segment = Segment(2 * kMiB),
                              .live = {{8 * kPage, kPage}, {0, 2 * kPage}, {kPage * 2, kPage}}});
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ASSERT_EQ(adopted->size(), 3u);
  EXPECT_EQ((*adopted)[0].offset, 8 * kPage);
  EXPECT_EQ((*adopted)[1].offset, 0u);
  EXPECT_EQ((*adopted)[1].bytes, 2 * kPage);
  EXPECT_EQ((*adopted)[2].offset, 2 * kPage);
  for (const Allocation& allocation : *adopted) {
    EXPECT_EQ(allocation.segment_id, 1u << 29);
    EXPECT_EQ(allocation.domain, kBob);
  }
  EXPECT_EQ(pool->Stats().used_bytes, 4 * kPage);
  // A freed small block is reused as its class, where it was.
  const std::uint64_t offset = (*adopted)[1].offset;
  pool->Free(std::move((*adopted)[1]));
  Allocation again = Allocate(*pool, 2 * kPage, kBob);
  EXPECT_EQ(again.offset, offset);
  pool->Free(std::move(again));
  pool->Free(std::move((*adopted)[0]));
  pool->Free(std::move((*adopted)[2]));
}

// A segment whose size no backend would give, for the size check.
class OddSegment : public backend::Segment {
 public:
  std::uint64_t size() const override { return kMiB + 1; }
  absl::StatusOr<ExportedHandle> Export(Access) const override {
    return absl::InternalError("not exportable");
  }
};

TEST_F(CarvingPoolAdoptTest, BadSegmentsAreInvalidArgumentWithTheNumbers) {
  auto pool = MakePool();
  auto refusal = [&](AdoptedSegment segment) {
    auto adopted = pool->Adopt(std::move(segment));
    EXPECT_FALSE(adopted.ok());
    return adopted.status();
  };
  constexpr std::uint64_t kId = 1u << 28;
  absl::Status status = refusal({.id = kId, .domain = kAlice});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = refusal({.id = kId, .domain = kAlice, .segment = std::make_shared<OddSegment>()});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(std::to_string(kMiB + 1)));
  // Overlapping.
  status = refusal({.id = kId, .domain = kAlice, .segment = Segment(2 * kMiB),
                    .live = {{0, 2 * kPage}, {kPage, kPage}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("overlaps"));
  // Out of bounds.
  status = refusal({.id = kId, .domain = kAlice, .segment = Segment(2 * kMiB),
                    .live = {{2 * kMiB - kPage, 2 * kPage}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(std::to_string(2 * kMiB)));
  // Misaligned, offset or size.
  status = refusal({.id = kId, .domain = kAlice, .segment = Segment(2 * kMiB),
                    .live = {{100, kPage}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("alignment 4096"));
  status = refusal({.id = kId, .domain = kAlice, .segment = Segment(2 * kMiB),
                    .live = {{0, kPage + 1}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // Not a size class, in a small segment (17 pages: classes step by 2
  // pages there); fine in a large one.
  status = refusal({.id = kId, .small = true, .domain = kAlice, .segment = Segment(2 * kMiB),
                    .live = {{0, 17 * kPage}}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("size class"));
  auto large = pool->Adopt({.id = kId, .domain = kAlice, .segment = Segment(2 * kMiB),
                            .live = {{0, 17 * kPage}}});
  ASSERT_TRUE(large.ok()) << large.status();
  // The same id again.
  status = refusal({.id = kId, .domain = kBob, .segment = Segment(2 * kMiB)});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("already"));
  // Nothing of the refusals was counted.
  EXPECT_EQ(pool->Stats().segments, 1u);
  EXPECT_EQ(pool->Stats().used_bytes, 17 * kPage);
  pool->Free(std::move((*large)[0]));
}

// A limit lowered across a restart does not destroy buffers: what was
// reserved is adopted past it, and the pool refuses to grow until it is
// back under the limit.
TEST_F(CarvingPoolAdoptTest, PastTheLimitIsAdoptedAndThePoolStopsGrowing) {
  CarvingPoolOptions options;
  options.limit_bytes = 3 * kMiB;
  auto pool = MakePool(options);
  auto first = pool->Adopt({.id = 1u << 27, .domain = kAlice, .segment = Segment(2 * kMiB),
                            .live = {{0, 2 * kMiB}}});
  ASSERT_TRUE(first.ok()) << first.status();
  auto past = pool->Adopt({.id = (1u << 27) + 1, .domain = kAlice, .segment = Segment(2 * kMiB),
                           .live = {{0, 2 * kMiB}}});
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(pool->Stats().reserved_bytes, 4 * kMiB);
  EXPECT_EQ(pool->Stats().segments, 2u);
  auto grow = pool->Allocate(2 * kMiB, kAlice);
  EXPECT_EQ(grow.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(grow.status().message(), HasSubstr(std::to_string(3 * kMiB)));
  for (Allocation& allocation : *first) pool->Free(std::move(allocation));
  for (Allocation& allocation : *past) pool->Free(std::move(allocation));
}

TEST_F(CarvingPoolAdoptTest, TracingPoolForwardsAndTracesTheAdoptedAllocations) {
  UniqueFd file(::memfd_create("trace", MFD_CLOEXEC));
  ASSERT_TRUE(file.valid());
  auto writer = std::make_shared<TraceWriter>(file.get(), "memfd");
  TracingPool pool(MakePool(), writer);
  auto adopted = pool.Adopt({.id = 1u << 26,
                             .domain = kAlice,
                             .segment = Segment(2 * kMiB),
                             .live = {{0, kPage}, {kMiB, 3 * kPage}}});
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  ASSERT_EQ(adopted->size(), 2u);
  const std::uint64_t first = (*adopted)[0].id, second = (*adopted)[1].id;
  EXPECT_NE(first, second);
  EXPECT_EQ(pool.Stats().used_bytes, 4 * kPage);
  pool.Free(std::move((*adopted)[0]));
  pool.Free(std::move((*adopted)[1]));
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
  ASSERT_TRUE(writer->Flush().ok());
  std::string trace(4096, '\0');
  const ssize_t length = ::pread(file.get(), trace.data(), trace.size(), 0);
  ASSERT_GT(length, 0);
  trace.resize(static_cast<std::size_t>(length));
  EXPECT_EQ(trace, absl::StrCat("op,id,bytes\na,", first, ",4096\na,", second,
                                ",12288\nf,", first, ",0\nf,", second, ",0\n"));
}

}  // namespace
}  // namespace memd::pool
