// The wait before a failed chunk's next attempt: doubling per attempt,
// jitter within [0.5, 1.5), one sequence per seed.

#include "daemon/transfer/retry_backoff.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace memd::transfer {
namespace {

constexpr absl::Duration kBase = absl::Milliseconds(1);

TEST(RetryBackoffTest, EveryWaitLiesWithinHalfAndOneAndAHalfTimesTheDoubledBase) {
  RetryBackoff backoff(kBase, 12345);
  for (int attempt = 0; attempt <= 25; ++attempt) {
    const absl::Duration doubled = kBase * (std::int64_t{1} << std::min(attempt, 20));
    EXPECT_EQ(backoff.Shortest(attempt), doubled / 2) << attempt;
    EXPECT_EQ(backoff.Longest(attempt), doubled * 3 / 2) << attempt;
    for (int draw = 0; draw < 200; ++draw) {
      const absl::Duration wait = backoff.After(attempt);
      EXPECT_GE(wait, backoff.Shortest(attempt)) << attempt;
      EXPECT_LT(wait, backoff.Longest(attempt)) << attempt;
    }
  }
}

TEST(RetryBackoffTest, WaitsDoublePerAttemptUpToTheTwentiethAndNoFurther) {
  const RetryBackoff backoff(kBase);
  EXPECT_EQ(backoff.Shortest(1), 2 * backoff.Shortest(0));
  EXPECT_EQ(backoff.Longest(4), 16 * backoff.Longest(0));
  EXPECT_EQ(backoff.Shortest(20), kBase * (1 << 20) / 2);
  EXPECT_EQ(backoff.Shortest(21), backoff.Shortest(20));
  EXPECT_EQ(backoff.Longest(1000), backoff.Longest(20));
  EXPECT_EQ(backoff.Shortest(-1), backoff.Shortest(0));  // Never shorter than the first.
}

TEST(RetryBackoffTest, OneSeedGivesOneSequenceAndAnotherSeedAnother) {
  RetryBackoff first(kBase, 7);
  RetryBackoff again(kBase, 7);
  RetryBackoff other(kBase, 8);
  std::vector<absl::Duration> a, b, c;
  for (int i = 0; i < 50; ++i) {
    a.push_back(first.After(i % 4));
    b.push_back(again.After(i % 4));
    c.push_back(other.After(i % 4));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// Chunks that fail together (one device hiccup) come back spread over the
// whole window, not together: 1000 draws use both ends and many values.
TEST(RetryBackoffTest, TheJitterSpreadsWaitsOverTheWindow) {
  RetryBackoff backoff(kBase);
  std::set<absl::Duration> seen;
  absl::Duration sum;
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration wait = backoff.After(0);
    seen.insert(wait);
    sum += wait;
  }
  EXPECT_LT(*seen.begin(), kBase * 0.6);
  EXPECT_GT(*seen.rbegin(), kBase * 1.4);
  EXPECT_GT(seen.size(), 500u);
  EXPECT_GT(sum / 1000, kBase * 0.9);
  EXPECT_LT(sum / 1000, kBase * 1.1);
}

// Seed 0 would keep xorshift at 0 for ever (every wait the shortest).
TEST(RetryBackoffTest, ASeedOfZeroStillJitters) {
  RetryBackoff backoff(kBase, 0);
  std::set<absl::Duration> seen;
  for (int i = 0; i < 10; ++i) seen.insert(backoff.After(0));
  EXPECT_GT(seen.size(), 5u);
}

TEST(RetryBackoffTest, NoBaseNoWait) {
  RetryBackoff backoff(absl::ZeroDuration());
  for (int attempt = 0; attempt < 5; ++attempt) {
    EXPECT_EQ(backoff.After(attempt), absl::ZeroDuration());
  }
}

}  // namespace
}  // namespace memd::transfer
