// Random operations against the pool engine, with every invariant checked
// against a plain model of the live allocations after every operation.

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "daemon/pool/carving_pool.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/fake_clock.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = 1 << 20;

struct Live {
  Allocation allocation;
  std::uint64_t requested;
};

class RandomOperationsTest : public ::testing::TestWithParam<bool> {
 protected:
  void CheckInvariants(const CarvingPool& pool, const std::map<int, Live>& live) {
    std::uint64_t used = 0;
    std::map<std::uint64_t, std::vector<const Live*>> by_segment;
    for (const auto& [id, entry] : live) {
      const Allocation& a = entry.allocation;
      ASSERT_EQ(a.offset % kPage, 0u);
      ASSERT_EQ(a.bytes % kPage, 0u);
      ASSERT_GE(a.bytes, entry.requested);
      ASSERT_LE(a.offset + a.bytes, a.segment_bytes());
      used += a.bytes;
      by_segment[a.segment_id].push_back(&entry);
    }
    for (auto& [segment, entries] : by_segment) {
      std::sort(entries.begin(), entries.end(), [](const Live* x, const Live* y) {
        return x->allocation.offset < y->allocation.offset;
      });
      for (std::size_t i = 0; i < entries.size(); ++i) {
        // One domain per segment, and no overlap.
        ASSERT_EQ(entries[i]->allocation.domain, entries[0]->allocation.domain);
        if (i > 0) {
          ASSERT_LE(entries[i - 1]->allocation.offset + entries[i - 1]->allocation.bytes,
                    entries[i]->allocation.offset);
        }
      }
    }
    PoolStats stats = pool.Stats();
    ASSERT_EQ(stats.used_bytes, used);
    ASSERT_EQ(stats.reserved_bytes, backend_.alive_bytes());
    ASSERT_EQ(stats.segments, static_cast<std::uint64_t>(backend_.alive()));
    ASSERT_LE(stats.reserved_bytes, stats.limit_bytes);
    ASSERT_LE(stats.largest_free_bytes, stats.free_bytes());
    ASSERT_GE(stats.fragmentation(), 0.0);
    ASSERT_LE(stats.fragmentation(), 1.0);
    ASSERT_GE(stats.peak_used_bytes, stats.used_bytes);
    ASSERT_GE(stats.peak_reserved_bytes, stats.reserved_bytes);
  }

  test::FakeClock clock_;
  test::FakeBackend backend_{test::FakeBackend::Memory::kHollow};
};

TEST_P(RandomOperationsTest, InvariantsHoldAfterEveryOperation) {
  CarvingPoolOptions options;
  options.limit_bytes = 256 * kMiB;
  options.scrub_between_domains = GetParam();
  CarvingPool pool(backend_, Location::Host(), options, clock_);
  const Domain domains[] = {{1000, 100, 0600}, {1000, 100, 0644}, {1001, 101, 0600}};
  std::mt19937_64 random(20261122);
  std::map<int, Live> live;
  int next_id = 0;
  int failures = 0;
  for (int step = 0; step < 6000; ++step) {
    const std::uint64_t dice = random() % 100;
    if (dice < 55 || live.empty()) {
      std::uint64_t bytes;
      if (random() % 4 == 0) {
        bytes = kMiB + random() % (24 * kMiB);  // Large.
      } else {
        bytes = 1 + random() % (kMiB);  // Small, any byte count.
      }
      const Domain& domain = domains[random() % 3];
      auto allocation = pool.Allocate(bytes, domain);
      if (!allocation.ok()) {
        ASSERT_EQ(allocation.status().code(), absl::StatusCode::kResourceExhausted)
            << allocation.status();
        ++failures;
      } else {
        ASSERT_EQ(allocation->domain, domain);
        live.emplace(next_id++, Live{std::move(*allocation), bytes});
      }
    } else if (dice < 97) {
      auto victim = std::next(live.begin(), random() % live.size());
      pool.Free(std::move(victim->second.allocation));
      live.erase(victim);
    } else {
      clock_.Advance(absl::Seconds(random() % 20));
      pool.Trim(random() % 2 ? absl::ZeroDuration() : absl::Seconds(10));
    }
    CheckInvariants(pool, live);
    if (HasFatalFailure()) {
      FAIL() << "at step " << step;
    }
  }
  // The limit was reached sometimes, so that path ran too.
  EXPECT_GT(failures, 0);
  for (auto& [id, entry] : live) pool.Free(std::move(entry.allocation));
  live.clear();
  CheckInvariants(pool, live);
  pool.Trim(absl::ZeroDuration());
  EXPECT_EQ(backend_.alive(), 0);
  if (GetParam()) {
    EXPECT_GT(pool.Stats().scrubbed_bytes, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(ScrubBetweenDomains, RandomOperationsTest,
                         ::testing::Bool());

}  // namespace
}  // namespace memd::pool
