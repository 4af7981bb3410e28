#include "daemon/pool/periodic_trimmer.h"

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace memd::pool {
namespace {

// Counts Trim calls and remembers the idle time it was given.
class CountingPool : public Pool {
 public:
  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return 4096; }
  absl::StatusOr<Allocation> Allocate(std::uint64_t, Domain) override {
    return absl::UnimplementedError("not in this test");
  }
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override { return bytes; }
  void Free(Allocation) override {}
  std::uint64_t Trim(absl::Duration min_idle) override {
    absl::MutexLock lock(&mu);
    ++calls;
    last_idle = min_idle;
    return 0;
  }
  PoolStats Stats() const override { return {}; }

  absl::Mutex mu;
  int calls ABSL_GUARDED_BY(mu) = 0;
  absl::Duration last_idle ABSL_GUARDED_BY(mu);

 private:
  Location location_ = Location::Host();
};

TEST(PeriodicTrimmerTest, TrimsEveryPoolWithTheIdleTimeUntilStopped) {
  PoolSet pools;
  auto owned = std::make_unique<CountingPool>();
  CountingPool* pool = owned.get();
  pools.Add(std::move(owned));
  PeriodicTrimmer trimmer(pools, absl::Seconds(60), absl::Milliseconds(5));
  {
    absl::MutexLock lock(&pool->mu);
    auto three_calls = [pool]() ABSL_SHARED_LOCKS_REQUIRED(pool->mu) {
      return pool->calls >= 3;
    };
    ASSERT_TRUE(pool->mu.AwaitWithTimeout(absl::Condition(&three_calls),
                                          absl::Seconds(30)));
    EXPECT_EQ(pool->last_idle, absl::Seconds(60));
  }
  trimmer.Stop();
  int after_stop;
  {
    absl::MutexLock lock(&pool->mu);
    after_stop = pool->calls;
  }
  trimmer.Stop();  // Idempotent.
  absl::MutexLock lock(&pool->mu);
  EXPECT_EQ(pool->calls, after_stop);  // The thread is gone.
}

TEST(PeriodicTrimmerTest, StopsAtOnceEvenWithALongPeriod) {
  PoolSet pools;
  pools.Add(std::make_unique<CountingPool>());
  const absl::Time start = absl::Now();
  {
    PeriodicTrimmer trimmer(pools, absl::Seconds(60), absl::Hours(1));
  }
  EXPECT_LT(absl::Now() - start, absl::Minutes(1));
}

}  // namespace
}  // namespace memd::pool
