#include "daemon/pool/idle_segments.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

class IdleSegmentsTest : public ::testing::Test {
 protected:
  // Adds an all-free segment of `bytes` to `arena`; returns it (borrowed).
  PoolSegment* Add(Arena& arena, std::uint64_t bytes, bool small = false) {
    auto backing = backend_.Reserve(Location::Host(), bytes);
    EXPECT_TRUE(backing.ok());
    auto segment = std::make_unique<PoolSegment>(
        std::shared_ptr<backend::Segment>(std::move(*backing)), bytes, small,
        next_seq_++);
    PoolSegment* raw = segment.get();
    absl::MutexLock lock(&arena.mu);
    arena.AdoptLocked(std::move(segment));
    return raw;
  }
  static std::uint64_t Bytes(const std::vector<std::unique_ptr<PoolSegment>>& segments) {
    std::uint64_t bytes = 0;
    for (const auto& segment : segments) bytes += segment->size;
    return bytes;
  }

  test::FakeBackend backend_{test::FakeBackend::Memory::kHollow};
  std::uint64_t next_seq_ = 1;
  Arena alice_{Domain{1000, 100, 0600}, 1};
  Arena bob_{Domain{1001, 100, 0600}, 1};
  std::vector<Arena*> arenas_{&alice_, &bob_};
};

TEST_F(IdleSegmentsTest, TrimTakesIdleSegmentsAndLeavesBusyAndHeldOnes) {
  Add(alice_, 4 * kMiB);
  PoolSegment* busy = Add(alice_, 2 * kMiB);
  busy->used = kMiB;
  PoolSegment* held = Add(bob_, 8 * kMiB);
  std::shared_ptr<backend::Segment> holder = held->backing;
  EXPECT_EQ(HeldIdleBytes(arenas_), 8 * kMiB);
  auto detached = DetachIdleFor(arenas_, /*now_ns=*/0, /*min_idle_ns=*/0);
  EXPECT_EQ(Bytes(detached), 4 * kMiB);
  EXPECT_EQ(detached[0]->arena, nullptr);
  holder.reset();
  EXPECT_EQ(HeldIdleBytes(arenas_), 0u);
  EXPECT_EQ(Bytes(DetachIdleFor(arenas_, 0, 0)), 8 * kMiB);
  busy->used = 0;
}

TEST_F(IdleSegmentsTest, TrimWaitsUntilASegmentWasIdleLongEnough) {
  Add(alice_, 4 * kMiB);
  EXPECT_TRUE(DetachIdleFor(arenas_, /*now_ns=*/100, /*min_idle_ns=*/50).empty());
  EXPECT_TRUE(DetachIdleFor(arenas_, 149, 50).empty());
  EXPECT_EQ(Bytes(DetachIdleFor(arenas_, 150, 50)), 4 * kMiB);
}

TEST_F(IdleSegmentsTest, ATouchedSegmentStartsItsIdleTimeOver) {
  PoolSegment* segment = Add(alice_, 4 * kMiB);
  EXPECT_TRUE(DetachIdleFor(arenas_, 100, 50).empty());
  segment->touched = true;  // Allocated and freed since.
  EXPECT_TRUE(DetachIdleFor(arenas_, 150, 50).empty());
  // Its idle time starts at the next look that finds it untouched.
  EXPECT_TRUE(DetachIdleFor(arenas_, 160, 50).empty());
  EXPECT_TRUE(DetachIdleFor(arenas_, 209, 50).empty());
  EXPECT_EQ(Bytes(DetachIdleFor(arenas_, 210, 50)), 4 * kMiB);
}

TEST_F(IdleSegmentsTest, DetachIdleTakesWhatTheChooserPicks) {
  Add(alice_, 4 * kMiB);
  Add(bob_, 8 * kMiB);
  bool saw_held = true;
  auto detached = DetachIdle(
      arenas_,
      [](std::vector<IdleSegment> idle) {
        EXPECT_EQ(idle.size(), 2u);
        std::vector<IdleSegment> larger;
        for (const IdleSegment& segment : idle) {
          if (segment.size > 4 * kMiB) larger.push_back(segment);
        }
        return larger;
      },
      &saw_held);
  EXPECT_EQ(Bytes(detached), 8 * kMiB);
  EXPECT_FALSE(saw_held);
}

TEST_F(IdleSegmentsTest, DetachIdleSkipsAPickUsedSinceTheScanAndReportsHeldOnes) {
  PoolSegment* segment = Add(alice_, 4 * kMiB);
  PoolSegment* held = Add(bob_, 8 * kMiB);
  std::shared_ptr<backend::Segment> holder = held->backing;
  bool saw_held = false;
  auto detached = DetachIdle(
      arenas_,
      [&](std::vector<IdleSegment> idle) {
        segment->used = kMiB;  // An allocation came in meanwhile.
        return idle;
      },
      &saw_held);
  EXPECT_TRUE(detached.empty());
  EXPECT_TRUE(saw_held);
  segment->used = 0;
}

TEST_F(IdleSegmentsTest, StealTakesTheSmallestFittingIdleSegmentOfAnotherArena) {
  Add(alice_, 2 * kMiB);  // The thief's own: never taken.
  Add(bob_, 16 * kMiB);
  PoolSegment* fits = Add(bob_, 8 * kMiB);
  Add(bob_, 8 * kMiB, /*small=*/true);  // Another kind.
  std::unique_ptr<PoolSegment> stolen = StealIdle(arenas_, alice_, false, 4 * kMiB);
  EXPECT_EQ(stolen.get(), fits);
  EXPECT_EQ(StealIdle(arenas_, alice_, false, 32 * kMiB), nullptr);
}

}  // namespace
}  // namespace memd::pool
