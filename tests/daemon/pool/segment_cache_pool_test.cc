#include "daemon/pool/segment_cache_pool.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"

namespace memd::pool {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = 1 << 20;

class SegmentCachePoolTest : public ::testing::Test {
 protected:
  SegmentCachePool MakePool(std::uint64_t limit, std::uint64_t cache) {
    return SegmentCachePool(backend_, Location::Host(), {limit, cache});
  }
  testing::FakeBackend backend_;
};

TEST_F(SegmentCachePoolTest, RoundsUpToTheAlignmentAndCountsAMiss) {
  SegmentCachePool pool = MakePool(64 * kMiB, 64 * kMiB);
  auto allocation = pool.Allocate(100, Domain{1000, 1000, 0600});
  ASSERT_TRUE(allocation.ok()) << allocation.status();
  EXPECT_EQ(allocation->bytes, kPage);
  EXPECT_EQ(allocation->offset, 0u);
  EXPECT_EQ(allocation->segment->size(), kPage);
  PoolStats stats = pool.Stats();
  EXPECT_EQ(stats.used_bytes, kPage);
  EXPECT_EQ(stats.reserved_bytes, kPage);
  EXPECT_EQ(stats.miss_count, 1u);
  EXPECT_EQ(stats.hit_count, 0u);
  EXPECT_EQ(stats.segments, 1u);
  pool.Free(std::move(*allocation));
}

TEST_F(SegmentCachePoolTest, FreedMemoryServesTheSameDomainAndSizeAsAHit) {
  SegmentCachePool pool = MakePool(64 * kMiB, 64 * kMiB);
  auto first = pool.Allocate(kMiB, Domain{1000, 1000, 0600});
  ASSERT_TRUE(first.ok());
  backend::Segment* segment = first->segment.get();
  pool.Free(std::move(*first));
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
  EXPECT_EQ(pool.Stats().reserved_bytes, kMiB);

  auto second = pool.Allocate(kMiB, Domain{1000, 1000, 0600});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->segment.get(), segment);
  EXPECT_EQ(pool.Stats().hit_count, 1u);
  EXPECT_EQ(pool.Stats().miss_count, 1u);
  EXPECT_EQ(backend_.reserved(), 1);
  pool.Free(std::move(*second));
}

TEST_F(SegmentCachePoolTest, NeverHandsMemoryToAnotherDomain) {
  SegmentCachePool pool = MakePool(64 * kMiB, 64 * kMiB);
  auto first = pool.Allocate(kMiB, Domain{1000, 1000, 0600});
  ASSERT_TRUE(first.ok());
  backend::Segment* segment = first->segment.get();
  pool.Free(std::move(*first));
  auto other = pool.Allocate(kMiB, Domain{2000, 2000, 0600});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->segment.get(), segment);
  EXPECT_EQ(pool.Stats().hit_count, 0u);
  pool.Free(std::move(*other));
}

TEST_F(SegmentCachePoolTest, CacheBeyondItsCapGoesBackToTheBackend) {
  SegmentCachePool pool = MakePool(64 * kMiB, kMiB);
  auto a = pool.Allocate(kMiB, Domain{1, 1, 0600});
  auto b = pool.Allocate(kMiB, Domain{1, 1, 0600});
  ASSERT_TRUE(a.ok() && b.ok());
  pool.Free(std::move(*a));
  pool.Free(std::move(*b));
  EXPECT_EQ(backend_.alive(), 1);
  EXPECT_EQ(pool.Stats().reserved_bytes, kMiB);
}

TEST_F(SegmentCachePoolTest, AtTheLimitCachedMemoryIsTrimmedFirst) {
  SegmentCachePool pool = MakePool(2 * kMiB, 2 * kMiB);
  auto a = pool.Allocate(kMiB, Domain{1, 1, 0600});
  auto b = pool.Allocate(kMiB, Domain{2, 2, 0600});
  ASSERT_TRUE(a.ok() && b.ok());
  pool.Free(std::move(*a));
  // Domain 3 cannot use domain 1's cached MiB, but it can have its room.
  auto c = pool.Allocate(kMiB, Domain{3, 3, 0600});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(pool.Stats().reserved_bytes, 2 * kMiB);
  EXPECT_EQ(backend_.alive(), 2);
  pool.Free(std::move(*b));
  pool.Free(std::move(*c));
}

TEST_F(SegmentCachePoolTest, BeyondTheLimitIsResourceExhaustedWithTheNumbers) {
  SegmentCachePool pool = MakePool(2 * kMiB, 2 * kMiB);
  auto a = pool.Allocate(kMiB, Domain{1, 1, 0600});
  ASSERT_TRUE(a.ok());
  auto b = pool.Allocate(2 * kMiB, Domain{1, 1, 0600});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("2097152"));  // The limit.
  EXPECT_THAT(b.status().message(), HasSubstr("1048576"));  // Reserved now.
  EXPECT_THAT(b.status().message(), HasSubstr("host pool"));
  EXPECT_EQ(pool.Stats().reserved_bytes, kMiB);
  pool.Free(std::move(*a));
}

TEST_F(SegmentCachePoolTest, BackendFailureLeavesTheAccountsUntouched) {
  SegmentCachePool pool = MakePool(64 * kMiB, 64 * kMiB);
  backend_.FailNextReserve(absl::ResourceExhaustedError("fake: out of memory"));
  auto failed = pool.Allocate(kMiB, Domain{1, 1, 0600});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("fake: out of memory"));
  PoolStats stats = pool.Stats();
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.miss_count, 0u);
  EXPECT_TRUE(pool.Allocate(kMiB, Domain{1, 1, 0600}).ok());
}

TEST_F(SegmentCachePoolTest, ZeroAndOverflowingSizesAreInvalid) {
  SegmentCachePool pool = MakePool(64 * kMiB, 64 * kMiB);
  EXPECT_EQ(pool.Allocate(0, Domain{1, 1, 0600}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Allocate(~std::uint64_t{0}, Domain{1, 1, 0600}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SegmentCachePoolTest, ConcurrentAllocationsNeverPassTheLimit) {
  SegmentCachePool pool = MakePool(8 * kPage, 8 * kPage);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  std::vector<Allocation> kept[4];
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto allocation = pool.Allocate(kPage, Domain{static_cast<uid_t>(t), 0, 0600});
        if (!allocation.ok()) continue;
        ++granted;
        EXPECT_LE(pool.Stats().reserved_bytes, 8 * kPage);
        if (i % 2 == 0) {
          pool.Free(std::move(*allocation));
        } else {
          kept[t].push_back(std::move(*allocation));
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_GT(granted.load(), 0);
  std::uint64_t held = 0;
  for (auto& list : kept) held += list.size() * kPage;
  EXPECT_EQ(pool.Stats().used_bytes, held);
  EXPECT_LE(pool.Stats().reserved_bytes, 8 * kPage);
  for (auto& list : kept) {
    for (auto& allocation : list) pool.Free(std::move(allocation));
  }
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
}

}  // namespace
}  // namespace memd::pool
