#include "daemon/pool/tracing_pool.h"

#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/temp_dir.h"

namespace memd::pool {
namespace {

using ::memd::test::TempDir;

constexpr Domain kDomain{1000, 1000, 0600};

std::vector<TraceEvent> ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TraceReader reader(in);
  std::vector<TraceEvent> events;
  for (;;) {
    absl::StatusOr<std::optional<TraceEvent>> event = reader.Next();
    EXPECT_TRUE(event.ok()) << event.status();
    if (!event.ok() || !event->has_value()) return events;
    events.push_back(**event);
  }
}

/// A pool that needs no memory and checks the ids it is given back: each
/// allocation gets an id of its own (from 1000 on), and Free records any id
/// it did not hand out. Thread-safe.
class IdCheckingPool : public Pool {
 public:
  explicit IdCheckingPool(std::uint64_t limit_bytes) : limit_bytes_(limit_bytes) {}

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return 4096; }
  absl::StatusOr<Allocation> Allocate(std::uint64_t bytes, Domain domain) override {
    absl::MutexLock lock(&mu_);
    const std::uint64_t aligned = AlignUp(bytes, 4096);
    if (aligned > limit_bytes_ - used_) return absl::ResourceExhaustedError("full");
    used_ += aligned;
    Allocation allocation;
    allocation.bytes = aligned;
    allocation.domain = domain;
    allocation.id = next_id_++;
    Attach(allocation, nullptr, allocation.id * 7);
    live_.insert(allocation.id);
    return allocation;
  }
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override {
    return AlignUp(bytes, 4096);
  }
  void Free(Allocation allocation) override {
    absl::MutexLock lock(&mu_);
    if (live_.erase(allocation.id) == 0 || InternalOf(allocation) != allocation.id * 7) {
      ++bad_frees_;
    }
    used_ -= allocation.bytes;
  }
  std::uint64_t Trim(absl::Duration) override { return 42; }
  PoolStats Stats() const override {
    absl::MutexLock lock(&mu_);
    PoolStats stats;
    stats.used_bytes = used_;
    stats.reserved_bytes = used_;
    return stats;
  }

  int bad_frees() const {
    absl::MutexLock lock(&mu_);
    return bad_frees_;
  }
  std::size_t live() const {
    absl::MutexLock lock(&mu_);
    return live_.size();
  }

 private:
  const Location location_ = Location::Device(0);
  const std::uint64_t limit_bytes_;
  mutable absl::Mutex mu_;
  std::uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1000;
  absl::flat_hash_set<std::uint64_t> live_ ABSL_GUARDED_BY(mu_);
  int bad_frees_ ABSL_GUARDED_BY(mu_) = 0;
};

class TracingPoolTest : public ::testing::Test {
 protected:
  std::shared_ptr<TraceWriter> MakeWriter() {
    auto writer = TraceWriter::Create(path_);
    EXPECT_TRUE(writer.ok()) << writer.status();
    return std::shared_ptr<TraceWriter>(std::move(*writer));
  }

  TempDir dir_;
  const std::string path_ = dir_.Join("trace.csv");
};

TEST_F(TracingPoolTest, RecordsTheRequestedSizeUnderAFreshId) {
  auto inner = std::make_unique<IdCheckingPool>(1 << 30);
  IdCheckingPool* checking = inner.get();
  auto writer = MakeWriter();
  TracingPool pool(std::move(inner), writer);

  auto first = pool.Allocate(100, kDomain);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = pool.Allocate(5000, kDomain);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->id, 1u);
  EXPECT_EQ(second->id, 2u);
  EXPECT_EQ(first->bytes, 4096u);  // The inner pool's answer, untouched.
  pool.Free(std::move(*first));
  pool.Free(std::move(*second));
  ASSERT_TRUE(writer->Flush().ok());

  EXPECT_EQ(checking->bad_frees(), 0);
  EXPECT_EQ(checking->live(), 0u);
  EXPECT_THAT(ReadTrace(path_),
              ::testing::ElementsAre(TraceEvent::Allocate(1, 100),
                                     TraceEvent::Allocate(2, 5000), TraceEvent::Free(1),
                                     TraceEvent::Free(2)));
}

TEST_F(TracingPoolTest, FailedAllocationsAreNotRecorded) {
  auto writer = MakeWriter();
  TracingPool pool(std::make_unique<IdCheckingPool>(8192), writer);
  auto fits = pool.Allocate(8192, kDomain);
  ASSERT_TRUE(fits.ok());
  auto refused = pool.Allocate(1, kDomain);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  pool.Free(std::move(*fits));
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_THAT(ReadTrace(path_), ::testing::ElementsAre(TraceEvent::Allocate(1, 8192),
                                                       TraceEvent::Free(1)));
}

TEST_F(TracingPoolTest, ForwardsEverythingElse) {
  auto writer = MakeWriter();
  TracingPool pool(std::make_unique<IdCheckingPool>(1 << 30), writer);
  EXPECT_EQ(pool.location(), Location::Device(0));
  EXPECT_EQ(pool.alignment(), 4096u);
  EXPECT_EQ(pool.Trim(absl::ZeroDuration()), 42u);
  EXPECT_EQ(pool.AllocationBytes(1), 4096u);
  auto allocation = pool.Allocate(1, kDomain);
  ASSERT_TRUE(allocation.ok());
  EXPECT_EQ(pool.Stats().used_bytes, 4096u);
  pool.Free(std::move(*allocation));
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
}

TEST_F(TracingPoolTest, PoolsSharingAFileNeverShareAnId) {
  auto writer = MakeWriter();
  TracingPool host(std::make_unique<IdCheckingPool>(1 << 30), writer);
  TracingPool device(std::make_unique<IdCheckingPool>(1 << 30), writer);
  // Both inner pools number their allocations from 1000: the trace must not.
  auto a = host.Allocate(10, kDomain);
  auto b = device.Allocate(20, kDomain);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->id, b->id);
  device.Free(std::move(*b));
  host.Free(std::move(*a));
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(ReadTrace(path_).size(), 4u);
}

TEST_F(TracingPoolTest, ConcurrentUseOverARealPoolGivesAConsistentTrace) {
  test::FakeBackend backend;
  RealClock clock;
  CarvingPoolOptions options;
  options.limit_bytes = 256 << 20;
  auto writer = MakeWriter();
  TracingPool pool(
      std::make_unique<CarvingPool>(backend, Location::Host(), options, clock),
      writer);
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      std::vector<Allocation> held;
      for (int round = 0; round < kRounds; ++round) {
        // Sizes that are not multiples of the alignment, distinct per thread.
        const std::uint64_t bytes = 1 + static_cast<std::uint64_t>(t * 100000 + round % 7 * 5000);
        auto allocation = pool.Allocate(bytes, kDomain);
        ASSERT_TRUE(allocation.ok()) << allocation.status();
        held.push_back(std::move(*allocation));
        if (round % 3 == 2) {
          pool.Free(std::move(held.front()));
          held.erase(held.begin());
        }
      }
      for (auto& allocation : held) pool.Free(std::move(allocation));
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(writer->Flush().ok());

  // The reader checks pairing (every free of a live id, no id allocated
  // twice while live); here: every size is one a thread asked for, every
  // id appears once, and everything was freed.
  std::vector<TraceEvent> events = ReadTrace(path_);
  ASSERT_EQ(events.size(), 2u * kThreads * kRounds);
  absl::flat_hash_set<std::uint64_t> allocated;
  absl::flat_hash_set<std::uint64_t> freed;
  for (const TraceEvent& event : events) {
    if (event.op == TraceEvent::Op::kAllocate) {
      EXPECT_TRUE(allocated.insert(event.id).second);
      const std::uint64_t thread = event.bytes / 100000;
      EXPECT_LT(thread, static_cast<std::uint64_t>(kThreads));
      EXPECT_EQ((event.bytes - 1 - thread * 100000) % 5000, 0u) << event.bytes;
    } else {
      EXPECT_TRUE(allocated.contains(event.id));
      EXPECT_TRUE(freed.insert(event.id).second);
    }
  }
  EXPECT_EQ(freed.size(), allocated.size());
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
}

}  // namespace
}  // namespace memd::pool
