#include "daemon/pool/carving_pool.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/fake_clock.h"

namespace memd::pool {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = 1 << 20;
const Domain kAlice{1000, 100, 0600};
const Domain kBob{1001, 100, 0600};

class CarvingPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<CarvingPool> MakePool(CarvingPoolOptions options = {},
                                        test::FakeBackend* backend = nullptr) {
    return std::make_unique<CarvingPool>(backend ? *backend : backend_,
                                         Location::Host(), options, clock_);
  }
  Allocation Allocate(Pool& pool, std::uint64_t bytes, Domain domain = kAlice) {
    auto allocation = pool.Allocate(bytes, domain);
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    return allocation.ok() ? std::move(*allocation) : Allocation{};
  }

  test::FakeClock clock_;
  test::FakeBackend backend_{test::FakeBackend::Memory::kHollow};
};

// ---- Size classes ----

TEST_F(CarvingPoolTest, AllocationBytesIsWhatAnAllocationOfThatSizeTakes) {
  auto pool = MakePool();
  for (std::uint64_t bytes : {std::uint64_t{1}, kPage - 1, kPage, kPage + 1,
                              std::uint64_t{70} << 10, kMiB - 1, kMiB, kMiB + 1,
                              3 * kMiB + 1}) {
    Allocation allocation = Allocate(*pool, bytes);
    EXPECT_EQ(pool->AllocationBytes(bytes), allocation.bytes) << bytes;
    pool->Free(std::move(allocation));
  }
  EXPECT_EQ(pool->AllocationBytes(1), kPage);
  EXPECT_EQ(pool->AllocationBytes(70 << 10), 72u << 10);  // Its size class.
  EXPECT_EQ(pool->AllocationBytes(0), 0u);
  EXPECT_EQ(pool->AllocationBytes(~std::uint64_t{0}), ~std::uint64_t{0}) << "overflows";
}

TEST_F(CarvingPoolTest, AllocationBytesOnADeviceIsAWholeGranule) {
  test::FakeBackend granular{test::FakeBackend::Memory::kHollow};
  granular.set_device_alignment(2 * kMiB);
  CarvingPool pool(granular, Location::Device(0), {}, clock_);
  EXPECT_EQ(pool.AllocationBytes(1), 2 * kMiB);
  EXPECT_EQ(pool.AllocationBytes(2 * kMiB + 1), 4 * kMiB);
  Allocation one = Allocate(pool, 1);
  EXPECT_EQ(one.bytes, 2 * kMiB);
  pool.Free(std::move(one));
}

TEST_F(CarvingPoolTest, SmallRequestIsRoundedToItsClassAndCarvedFromASmallSegment) {
  auto pool = MakePool();
  Allocation a = Allocate(*pool, 70 << 10);  // Class 72 KiB.
  EXPECT_EQ(a.bytes, 72u << 10);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.segment_bytes(), 2 * kMiB);  // The small segment size.
  Allocation b = Allocate(*pool, 100);
  EXPECT_EQ(b.bytes, kPage);
  EXPECT_EQ(b.segment_id, a.segment_id);  // Same segment, next to it.
  EXPECT_EQ(b.offset, 72u << 10);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.miss_count, 1u);
  EXPECT_EQ(stats.hit_count, 1u);
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.used_bytes, (72u << 10) + kPage);
  pool->Free(std::move(a));
  pool->Free(std::move(b));
}

TEST_F(CarvingPoolTest, FreedSmallBlockComesBackFromItsClassCache) {
  auto pool = MakePool();
  Allocation a = Allocate(*pool, 5000);
  const std::uint64_t offset = a.offset;
  pool->Free(std::move(a));
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.used_bytes, 0u);
  EXPECT_EQ(stats.size_classes[1].cached, 1u);  // The 8 KiB class.
  Allocation again = Allocate(*pool, 8000);
  EXPECT_EQ(again.offset, offset);
  stats = pool->Stats();
  EXPECT_EQ(stats.size_classes[1].cached, 0u);
  EXPECT_EQ(stats.size_classes[1].allocations, 2u);
  EXPECT_EQ(stats.hit_count, 1u);
  EXPECT_EQ(stats.miss_count, 1u);
  pool->Free(std::move(again));
}

TEST_F(CarvingPoolTest, CachedBlocksOfOtherClassesMergeWhenSpaceRunsOut) {
  CarvingPoolOptions options;
  options.small_segment_bytes = 64 * kPage;
  options.small_max_bytes = 64 * kPage;
  auto pool = MakePool(options);
  std::vector<Allocation> pages;
  for (int i = 0; i < 64; ++i) pages.push_back(Allocate(*pool, kPage));
  for (auto& page : pages) pool->Free(std::move(page));
  // All 64 pages sit in the 4 KiB class cache; a 256 KiB request fits only
  // once they are merged back into one block.
  Allocation whole = Allocate(*pool, 64 * kPage);
  EXPECT_EQ(whole.offset, 0u);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.miss_count, 1u);
  EXPECT_EQ(stats.size_classes[0].cached, 0u);
  pool->Free(std::move(whole));
}

// ---- Large requests: best fit, split, coalesce ----

TEST_F(CarvingPoolTest, LargeMissReservesASegmentOfTheRoundedRequest) {
  auto pool = MakePool();
  Allocation a = Allocate(*pool, 3 * kMiB + 1);
  EXPECT_EQ(a.bytes, 3 * kMiB + kPage);
  EXPECT_EQ(a.segment_bytes(), 3 * kMiB + kPage);
  EXPECT_EQ(pool->Stats().miss_count, 1u);
  pool->Free(std::move(a));
  EXPECT_EQ(pool->Stats().largest_free_bytes, 3 * kMiB + kPage);
}

TEST_F(CarvingPoolTest, LargeFreeSplitsForSmallerRequestsAndCoalescesBack) {
  CarvingPoolOptions options;
  options.large_fit_slack = 2.0;  // A 12 MiB block may serve 4 MiB requests.
  options.idle_budget = -1;
  auto pool = MakePool(options);
  pool->Free(Allocate(*pool, 12 * kMiB));
  Allocation a = Allocate(*pool, 4 * kMiB);
  Allocation b = Allocate(*pool, 4 * kMiB);
  Allocation c = Allocate(*pool, 4 * kMiB);
  EXPECT_EQ(a.segment_id, b.segment_id);
  EXPECT_EQ(b.segment_id, c.segment_id);
  EXPECT_EQ(b.offset, 4 * kMiB);
  EXPECT_EQ(pool->Stats().miss_count, 1u);
  EXPECT_EQ(pool->Stats().hit_count, 3u);
  pool->Free(std::move(a));
  pool->Free(std::move(c));
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.largest_free_bytes, 4 * kMiB);
  EXPECT_NEAR(stats.fragmentation(), 0.5, 1e-9);  // Two 4 MiB holes.
  pool->Free(std::move(b));  // Joins both neighbours.
  stats = pool->Stats();
  EXPECT_EQ(stats.largest_free_bytes, 12 * kMiB);
  EXPECT_EQ(stats.fragmentation(), 0.0);
  Allocation whole = Allocate(*pool, 12 * kMiB);
  EXPECT_EQ(whole.offset, 0u);
  EXPECT_EQ(pool->Stats().miss_count, 1u);
  pool->Free(std::move(whole));
}

TEST_F(CarvingPoolTest, AMuchBiggerFreeBlockStaysWholeForItsOwnSize) {
  CarvingPoolOptions options;
  options.idle_budget = -1;
  auto pool = MakePool(options);  // large_fit_slack 0.5 by default.
  Allocation big = Allocate(*pool, 12 * kMiB);
  const std::uint64_t big_segment = big.segment_id;
  pool->Free(std::move(big));
  Allocation small = Allocate(*pool, 4 * kMiB);  // 12 > 1.5 x 4: left whole.
  EXPECT_NE(small.segment_id, big_segment);
  EXPECT_EQ(pool->Stats().largest_free_bytes, 12 * kMiB);
  Allocation near = Allocate(*pool, 9 * kMiB);  // 12 <= 1.5 x 9: taken.
  EXPECT_EQ(near.segment_id, big_segment);
  pool->Free(std::move(small));
  pool->Free(std::move(near));
}

TEST_F(CarvingPoolTest, GrowingGivesBackIdleSegmentsBeyondTheBudget) {
  auto pool = MakePool();  // idle_budget 0.08 by default.
  pool->Free(Allocate(*pool, 8 * kMiB));  // Peak use 8 MiB; now idle.
  // 16 MiB does not fit; holding 8 + 16 would exceed 1.08 x 16 MiB.
  Allocation big = Allocate(*pool, 16 * kMiB);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(stats.trimmed_bytes, 8 * kMiB);
  EXPECT_EQ(backend_.alive(), 1);
  pool->Free(std::move(big));
}

TEST_F(CarvingPoolTest, IdleSegmentsWithinTheBudgetStay) {
  auto pool = MakePool();
  Allocation busy = Allocate(*pool, 8 * kMiB);
  pool->Free(Allocate(*pool, 8 * kMiB));  // Peak use 16 MiB; 8 idle.
  // 1.25 MiB does not fit the idle 8 MiB; 16 + 1.25 <= 1.08 x 16 MiB.
  Allocation small = Allocate(*pool, 5 * kMiB / 4);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.trimmed_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 16 * kMiB + 5 * kMiB / 4);
  pool->Free(std::move(busy));
  pool->Free(std::move(small));
}

TEST_F(CarvingPoolTest, BestFitTakesTheSmallestFreeBlockThatHolds) {
  auto pool = MakePool();
  Allocation big = Allocate(*pool, 16 * kMiB);
  Allocation small = Allocate(*pool, 5 * kMiB);
  const std::uint64_t small_segment = small.segment_id;
  pool->Free(std::move(big));
  pool->Free(std::move(small));
  Allocation fit = Allocate(*pool, 4 * kMiB);
  EXPECT_EQ(fit.segment_id, small_segment);
  pool->Free(std::move(fit));
}

TEST_F(CarvingPoolTest, LargeRoundingFollowsTheGrowthPolicy) {
  CarvingPoolOptions options;
  options.large_round_bytes = 2 * kMiB;
  auto pool = MakePool(options);
  Allocation a = Allocate(*pool, 3 * kMiB);
  EXPECT_EQ(a.bytes, 3 * kMiB);
  EXPECT_EQ(a.segment_bytes(), 4 * kMiB);
  pool->Free(std::move(a));
}

// ---- Domains ----

TEST_F(CarvingPoolTest, SegmentsServeOneDomainOnly) {
  CarvingPoolOptions options;
  options.idle_budget = -1;  // Keep Alice's idle segment to show it unused.
  auto pool = MakePool(options);
  Allocation alice = Allocate(*pool, kPage, kAlice);
  Allocation bob = Allocate(*pool, kPage, kBob);
  EXPECT_NE(alice.segment_id, bob.segment_id);
  pool->Free(std::move(alice));
  Allocation bob2 = Allocate(*pool, kPage, kBob);
  EXPECT_EQ(bob2.segment_id, bob.segment_id);
  // Another mode is another domain too.
  Allocation shared = Allocate(*pool, kPage, Domain{1000, 100, 0640});
  EXPECT_NE(shared.segment_id, bob.segment_id);
  EXPECT_EQ(pool->Stats().segments, 3u);
  pool->Free(std::move(bob));
  pool->Free(std::move(bob2));
  pool->Free(std::move(shared));
}

TEST_F(CarvingPoolTest, IdleMemoryNeverChangesDomainByDefault) {
  auto pool = MakePool();
  pool->Free(Allocate(*pool, 8 * kMiB, kAlice));
  Allocation bob = Allocate(*pool, 8 * kMiB, kBob);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.miss_count, 2u);
  EXPECT_EQ(stats.scrubbed_bytes, 0u);
  EXPECT_EQ(backend_.scrubs(), 0);
  pool->Free(std::move(bob));
}

TEST_F(CarvingPoolTest, WithScrubbingAnIdleSegmentMovesToAnotherDomainZeroed) {
  test::FakeBackend real(test::FakeBackend::Memory::kReal);
  CarvingPoolOptions options;
  options.scrub_between_domains = true;
  auto pool = MakePool(options, &real);
  Allocation alice = Allocate(*pool, 4 * kMiB, kAlice);
  auto fd = alice.Export(Access::kReadWrite);
  ASSERT_TRUE(fd.ok());
  void* map = ::mmap(nullptr, 4 * kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd->fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 0xAB, 4 * kMiB);
  ::munmap(map, 4 * kMiB);
  // By number: a reference held here would keep the segment in its domain.
  const std::uint64_t segment_id = alice.segment_id;
  pool->Free(std::move(alice));

  Allocation bob = Allocate(*pool, 4 * kMiB, kBob);
  EXPECT_EQ(bob.segment_id, segment_id);  // Moved, not reserved anew.
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.scrubbed_bytes, 4 * kMiB);
  EXPECT_EQ(stats.miss_count, 1u);
  EXPECT_EQ(stats.hit_count, 1u);
  EXPECT_EQ(real.scrubs(), 1);
  fd = bob.Export(Access::kRead);
  map = ::mmap(nullptr, 4 * kMiB, PROT_READ, MAP_SHARED, fd->fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  const auto* bytes = static_cast<const unsigned char*>(map);
  bool zero = true;
  for (std::uint64_t i = 0; i < 4 * kMiB; i += 512) zero = zero && bytes[i] == 0;
  EXPECT_TRUE(zero);
  ::munmap(map, 4 * kMiB);
  pool->Free(std::move(bob));
}

TEST_F(CarvingPoolTest, SegmentInUseNeverChangesDomain) {
  CarvingPoolOptions options;
  options.scrub_between_domains = true;
  auto pool = MakePool(options);
  Allocation alice = Allocate(*pool, kPage, kAlice);  // Keeps its segment busy.
  Allocation bob = Allocate(*pool, kPage, kBob);
  EXPECT_NE(bob.segment_id, alice.segment_id);
  EXPECT_EQ(pool->Stats().scrubbed_bytes, 0u);
  pool->Free(std::move(alice));
  pool->Free(std::move(bob));
}

// ---- Limits ----

TEST_F(CarvingPoolTest, AtTheLimitIdleSegmentsAreTrimmedFirst) {
  CarvingPoolOptions options;
  options.limit_bytes = 16 * kMiB;
  auto pool = MakePool(options);
  pool->Free(Allocate(*pool, 12 * kMiB, kAlice));  // Idle, but held.
  Allocation bob = Allocate(*pool, 10 * kMiB, kBob);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.reserved_bytes, 10 * kMiB);
  EXPECT_EQ(stats.trimmed_bytes, 12 * kMiB);
  EXPECT_EQ(backend_.alive_bytes(), 10 * kMiB);
  pool->Free(std::move(bob));
}

TEST_F(CarvingPoolTest, BeyondTheLimitIsResourceExhaustedWithTheNumbers) {
  CarvingPoolOptions options;
  options.limit_bytes = 16 * kMiB;
  auto pool = MakePool(options);
  Allocation held = Allocate(*pool, 12 * kMiB);
  auto failed = pool->Allocate(8 * kMiB, kAlice);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("host pool"));
  EXPECT_THAT(failed.status().message(), HasSubstr("8388608"));    // Asked.
  EXPECT_THAT(failed.status().message(), HasSubstr("16777216"));   // Limit.
  EXPECT_THAT(failed.status().message(), HasSubstr("12582912"));   // Reserved.
  EXPECT_EQ(pool->Stats().reserved_bytes, 12 * kMiB);
  pool->Free(std::move(held));
}

TEST_F(CarvingPoolTest, BackendFailuresPassThroughAndLeaveNoTrace) {
  auto pool = MakePool();
  backend_.FailNextReserve(absl::ResourceExhaustedError("fake: out of memory"));
  auto failed = pool->Allocate(kMiB * 3, kAlice);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("fake: out of memory"));
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.segments, 0u);
  EXPECT_EQ(stats.miss_count, 0u);
}

TEST_F(CarvingPoolTest, OnlyAFinalRefusalAtTheLimitCountsAsARejection) {
  CarvingPoolOptions options;
  options.limit_bytes = 16 * kMiB;
  auto pool = MakePool(options);
  pool->Free(Allocate(*pool, 12 * kMiB, kAlice));
  Allocation bob = Allocate(*pool, 10 * kMiB, kBob);  // Refused, trimmed, retried.
  EXPECT_EQ(pool->Stats().limit_rejections, 0u);
  EXPECT_EQ(pool->Allocate(10 * kMiB, kBob).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->Stats().limit_rejections, 1u);
  EXPECT_EQ(pool->Stats().limit_bytes, 16 * kMiB);
  pool->Free(std::move(bob));
}

TEST_F(CarvingPoolTest, ABackendOutOfMemoryTrimsIdleSegmentsAndRetriesOnce) {
  CarvingPoolOptions options;
  options.idle_budget = -1;  // Else the budget gives the idle one back first.
  auto pool = MakePool(options);
  pool->Free(Allocate(*pool, 4 * kMiB, kAlice));
  backend_.FailNextReserve(absl::ResourceExhaustedError("fake: out of memory"));
  Allocation bob = Allocate(*pool, 4 * kMiB, kBob);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.trimmed_bytes, 4 * kMiB);
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(stats.limit_rejections, 0u);
  pool->Free(std::move(bob));
}

TEST_F(CarvingPoolTest, ZeroAndOverflowingSizesAreInvalid) {
  auto pool = MakePool();
  EXPECT_EQ(pool->Allocate(0, kAlice).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->Allocate(~std::uint64_t{0}, kAlice).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Trim ----

TEST_F(CarvingPoolTest, TrimGivesBackIdleSegmentsEvenWithCachedBlocks) {
  auto pool = MakePool();
  Allocation small = Allocate(*pool, kPage);
  Allocation large = Allocate(*pool, 4 * kMiB);
  Allocation busy = Allocate(*pool, 4 * kMiB, kBob);
  pool->Free(std::move(small));  // Parked in the class cache.
  pool->Free(std::move(large));
  EXPECT_EQ(pool->Trim(absl::ZeroDuration()), 2 * kMiB + 4 * kMiB);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(stats.size_classes[0].cached, 0u);
  EXPECT_EQ(backend_.alive(), 1);
  pool->Free(std::move(busy));
}

TEST_F(CarvingPoolTest, SegmentsGivenBackAreDiscardedFirst) {
  // A client may still hold a descriptor of an idle segment: its memory
  // must go when the pool stops accounting for it.
  auto pool = MakePool();
  Allocation busy = Allocate(*pool, 4 * kMiB, kBob);
  pool->Free(Allocate(*pool, 4 * kMiB));
  EXPECT_EQ(pool->Trim(absl::ZeroDuration()), 4 * kMiB);
  EXPECT_EQ(backend_.discards(), 1);
  // Memory of a live buffer is never discarded, not even when the pool goes
  // (clients keep their mappings across a daemon restart).
  pool.reset();
  EXPECT_EQ(backend_.discards(), 1);
}

TEST_F(CarvingPoolTest, PeriodicTrimWaitsForTheIdleTime) {
  auto pool = MakePool();
  pool->Free(Allocate(*pool, 4 * kMiB));
  const absl::Duration idle = absl::Seconds(30);
  EXPECT_EQ(pool->Trim(idle), 0u);  // First seen idle now.
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(pool->Trim(idle), 0u);
  // Used again meanwhile: the idle time starts over.
  pool->Free(Allocate(*pool, 4 * kMiB));
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(pool->Trim(idle), 0u);
  EXPECT_EQ(pool->Trim(idle), 0u);
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(pool->Trim(idle), 4 * kMiB);
  EXPECT_EQ(pool->Stats().trimmed_bytes, 4 * kMiB);
  EXPECT_EQ(backend_.alive(), 0);
}

// ---- Segments held outside the pool ----
// A legacy CUDA IPC handle is bytes a client may open again at any time; the
// broker keeps the segment of every such handle it gave a session until the
// session ends. The pool must then neither give the segment back nor move
// it to another domain: giving it back would not even free it.

TEST_F(CarvingPoolTest, TrimKeepsAnIdleSegmentHeldOutsideThePool) {
  auto pool = MakePool();
  Allocation allocation = Allocate(*pool, 4 * kMiB);
  SegmentHold held = allocation.Hold();
  const std::uint64_t held_id = allocation.segment_id;
  pool->Free(std::move(allocation));
  EXPECT_EQ(pool->Trim(absl::ZeroDuration()), 0u);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB);  // Still the pool's, honestly.
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.trimmed_bytes, 0u);
  EXPECT_EQ(backend_.discards(), 0);
  EXPECT_EQ(backend_.alive(), 1);
  // Its own domain may use it meanwhile.
  Allocation again = Allocate(*pool, 4 * kMiB);
  EXPECT_EQ(again.segment_id, held_id);
  pool->Free(std::move(again));
  // Once nobody else holds it, it goes back like any idle segment.
  held = SegmentHold();
  EXPECT_EQ(pool->Trim(absl::ZeroDuration()), 4 * kMiB);
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
  EXPECT_EQ(backend_.alive(), 0);
}

TEST_F(CarvingPoolTest, PeriodicTrimKeepsAHeldSegmentAndTakesItOnceLetGo) {
  auto pool = MakePool();
  Allocation allocation = Allocate(*pool, 4 * kMiB);
  SegmentHold held = allocation.Hold();
  pool->Free(std::move(allocation));
  const absl::Duration idle = absl::Seconds(30);
  for (int look = 0; look < 4; ++look) {
    EXPECT_EQ(pool->Trim(idle), 0u);
    clock_.Advance(absl::Seconds(31));
  }
  held = SegmentHold();
  // Idle all along: it goes at the next look.
  EXPECT_EQ(pool->Trim(idle), 4 * kMiB);
}

TEST_F(CarvingPoolTest, WithScrubbingAHeldIdleSegmentNeverChangesDomain) {
  CarvingPoolOptions options;
  options.scrub_between_domains = true;
  auto pool = MakePool(options);
  Allocation alice = Allocate(*pool, 4 * kMiB, kAlice);
  SegmentHold held = alice.Hold();
  const std::uint64_t alice_segment = alice.segment_id;
  pool->Free(std::move(alice));
  Allocation bob = Allocate(*pool, 4 * kMiB, kBob);
  EXPECT_NE(bob.segment_id, alice_segment);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.scrubbed_bytes, 0u);
  EXPECT_EQ(stats.miss_count, 2u);
  EXPECT_EQ(backend_.scrubs(), 0);
  pool->Free(std::move(bob));
  // Let go, it may move.
  held = SegmentHold();
  Allocation carol = Allocate(*pool, 4 * kMiB, Domain{1002, 100, 0600});
  EXPECT_EQ(pool->Stats().scrubbed_bytes, 4 * kMiB);
  pool->Free(std::move(carol));
}

TEST_F(CarvingPoolTest, TheIdleBudgetKeepsHeldSegmentsAndTakesThemOnceLetGo) {
  auto pool = MakePool();  // idle_budget 0.08.
  Allocation first = Allocate(*pool, 8 * kMiB);
  SegmentHold held = first.Hold();
  pool->Free(std::move(first));
  // Beyond the budget, but the idle segment is held.
  Allocation big = Allocate(*pool, 16 * kMiB);
  EXPECT_EQ(pool->Stats().reserved_bytes, 24 * kMiB);
  EXPECT_EQ(pool->Stats().trimmed_bytes, 0u);
  held = SegmentHold();
  // No segment went idle since, yet the next growth finds the 8 MiB free
  // to go: 24 + 16 > 1.08 x 32 MiB.
  Allocation bigger = Allocate(*pool, 16 * kMiB);
  EXPECT_EQ(pool->Stats().trimmed_bytes, 8 * kMiB);
  EXPECT_EQ(pool->Stats().reserved_bytes, 32 * kMiB);
  pool->Free(std::move(big));
  pool->Free(std::move(bigger));
}

TEST_F(CarvingPoolTest, AtTheLimitAHeldIdleSegmentStaysAndTheMessageSaysWhy) {
  CarvingPoolOptions options;
  options.limit_bytes = 16 * kMiB;
  auto pool = MakePool(options);
  Allocation alice = Allocate(*pool, 12 * kMiB, kAlice);
  SegmentHold held = alice.Hold();
  pool->Free(std::move(alice));
  auto bob = pool->Allocate(10 * kMiB, kBob);
  EXPECT_EQ(bob.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(bob.status().message(),
              HasSubstr("12582912 bytes of idle segments are held"));
  EXPECT_EQ(pool->Stats().reserved_bytes, 12 * kMiB);
  EXPECT_EQ(backend_.alive_bytes(), 12 * kMiB);
  held = SegmentHold();
  Allocation retried = Allocate(*pool, 10 * kMiB, kBob);
  EXPECT_EQ(pool->Stats().reserved_bytes, 10 * kMiB);
  pool->Free(std::move(retried));
}

// ---- Statistics ----

TEST_F(CarvingPoolTest, PeaksRemainAfterMemoryGoesBack) {
  auto pool = MakePool();
  Allocation a = Allocate(*pool, 8 * kMiB);
  Allocation b = Allocate(*pool, 8 * kMiB);
  pool->Free(std::move(a));
  pool->Free(std::move(b));
  pool->Trim(absl::ZeroDuration());
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.peak_used_bytes, 16 * kMiB);
  EXPECT_EQ(stats.peak_reserved_bytes, 16 * kMiB);
  EXPECT_EQ(stats.used_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.fragmentation(), 0.0);
}

// ---- Threads ----

TEST_F(CarvingPoolTest, ConcurrentUseKeepsTheAccountsExact) {
  CarvingPoolOptions options;
  options.limit_bytes = 512 * kMiB;
  auto pool = MakePool(options);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Domain domain{static_cast<uid_t>(1000 + t % 2), 100, 0600};
      std::vector<Allocation> held;
      for (int i = 0; i < 2000; ++i) {
        const std::uint64_t bytes = (i % 7 == 0) ? (2 + i % 5) * kMiB : (1 + i % 40) * kPage;
        auto allocation = pool->Allocate(bytes, domain);
        if (!allocation.ok()) {
          ++failures;
          continue;
        }
        held.push_back(std::move(*allocation));
        if (held.size() > 20) {
          pool->Free(std::move(held[i % held.size()]));
          held.erase(held.begin() + i % held.size());
        }
        if (i % 500 == 0) pool->Trim(absl::ZeroDuration());
      }
      for (auto& allocation : held) pool->Free(std::move(allocation));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.used_bytes, 0u);
  EXPECT_EQ(stats.reserved_bytes, backend_.alive_bytes());
  EXPECT_EQ(stats.segments, static_cast<std::uint64_t>(backend_.alive()));
  pool->Trim(absl::ZeroDuration());
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
  EXPECT_EQ(backend_.alive(), 0);
}

}  // namespace
}  // namespace memd::pool
