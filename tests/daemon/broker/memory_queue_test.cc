// The order of creates waiting for memory at one location: first come first
// served within a uid, uids taking turns, a large head not overtaken, a
// waiter that comes back keeping its place.

#include "daemon/broker/memory_queue.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
const Location kDev0 = Location::Device(0);
const Location kDev1 = Location::Device(1);

TEST(MemoryQueueTest, OneUidsWaitersAreServedInTheOrderTheyCame) {
  MemoryQueue queue;
  for (MemoryQueue::Id id : {3, 1, 2}) queue.Add(id, kAlice, kDev0, kMiB);
  EXPECT_THAT(queue.Take(kDev0, 2 * kMiB), ElementsAre(3, 1));
  EXPECT_EQ(queue.bytes_at(kDev0), kMiB);
  EXPECT_THAT(queue.Take(kDev0, 100 * kMiB), ElementsAre(2));
  EXPECT_EQ(queue.size(), 0u);
}

TEST(MemoryQueueTest, UidsTakeTurnsSoAFloodCannotStarveANewcomer) {
  MemoryQueue queue;
  for (MemoryQueue::Id id = 1; id <= 1000; ++id) queue.Add(id, kAlice, kDev0, kMiB);
  queue.Add(5000, kBob, kDev0, kMiB);  // Came last.
  EXPECT_THAT(queue.Take(kDev0, kMiB), ElementsAre(1));     // Alice's head came first,
  EXPECT_THAT(queue.Take(kDev0, kMiB), ElementsAre(5000));  // then Bob has his turn,
  EXPECT_THAT(queue.Take(kDev0, 2 * kMiB), ElementsAre(2, 3));  // and Alice goes on.
  // Room for several at once: the same turns within one Take.
  queue.Add(5001, kBob, kDev0, kMiB);
  queue.Add(5002, kBob, kDev0, kMiB);
  EXPECT_THAT(queue.Take(kDev0, 4 * kMiB), ElementsAre(5001, 4, 5002, 5));
}

TEST(MemoryQueueTest, ALargeHeadIsNotOvertakenBySmallerOnes) {
  MemoryQueue queue;
  queue.Add(1, kAlice, kDev0, 10 * kMiB);
  queue.Add(2, kBob, kDev0, kMiB);
  EXPECT_THAT(queue.Take(kDev0, 5 * kMiB), IsEmpty());
  EXPECT_THAT(queue.Take(kDev0, 11 * kMiB), ElementsAre(1, 2));
}

TEST(MemoryQueueTest, AWaiterThatComesBackKeepsItsPlace) {
  MemoryQueue queue;
  const std::uint64_t first = queue.Add(1, kAlice, kDev0, kMiB);
  queue.Add(2, kBob, kDev0, kMiB);
  ASSERT_THAT(queue.Take(kDev0, kMiB), ElementsAre(1));
  // Woken, it found the room taken by a create that did not wait: back in
  // the place it had, ahead of Bob, who came later.
  EXPECT_EQ(queue.Add(1, kAlice, kDev0, kMiB, first), first);
  EXPECT_THAT(queue.Order(kDev0), ElementsAre(std::pair<MemoryQueue::Id, std::uint64_t>{1, kMiB},
                                              std::pair<MemoryQueue::Id, std::uint64_t>{2, kMiB}));
  EXPECT_THAT(queue.Take(kDev0, kMiB), ElementsAre(1));
}

TEST(MemoryQueueTest, LocationsQueueApartAndRemoveForgets) {
  MemoryQueue queue;
  queue.Add(1, kAlice, kDev0, kMiB);
  queue.Add(2, kAlice, kDev1, 2 * kMiB);
  queue.Add(3, kBob, kDev1, 3 * kMiB);
  EXPECT_EQ(queue.bytes_at(kDev1), 5 * kMiB);
  EXPECT_TRUE(queue.Remove(2));
  EXPECT_FALSE(queue.Remove(2));
  EXPECT_EQ(queue.bytes_at(kDev1), 3 * kMiB);
  EXPECT_THAT(queue.Take(kDev1, 100 * kMiB), ElementsAre(3));
  EXPECT_THAT(queue.Take(kDev0, 100 * kMiB), ElementsAre(1));
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_THAT(queue.Take(kDev0, 100 * kMiB), IsEmpty());
}

TEST(MemoryQueueTest, OrderIsWhatTakeWouldServe) {
  MemoryQueue queue;
  for (MemoryQueue::Id id = 1; id <= 3; ++id) queue.Add(id, kAlice, kDev0, id * kMiB);
  queue.Add(10, kBob, kDev0, kMiB);
  std::vector<MemoryQueue::Id> ordered;
  for (const auto& [id, bytes] : queue.Order(kDev0)) ordered.push_back(id);
  EXPECT_THAT(ordered, ElementsAre(1, 10, 2, 3));
  EXPECT_THAT(queue.Take(kDev0, 100 * kMiB), ElementsAre(1, 10, 2, 3));
}

// What Stats show: every uid's waiters for root, one uid's own for anyone
// else (what others wait for is theirs).
TEST(MemoryQueueTest, WaitersByLocationAreEveryUidsOrOneUidsOwn) {
  MemoryQueue queue;
  queue.Add(1, kAlice, kDev0, kMiB);
  queue.Add(2, kAlice, kDev0, 2 * kMiB);
  queue.Add(3, kBob, kDev0, 4 * kMiB);
  queue.Add(4, kBob, Location::Host(), 8 * kMiB);
  const auto all = queue.ByLocation();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at("device:0").calls, 3u);
  EXPECT_EQ(all.at("device:0").bytes, 7 * kMiB);
  EXPECT_EQ(all.at("host").bytes, 8 * kMiB);
  const auto alices = queue.ByLocation(kAlice);
  ASSERT_EQ(alices.size(), 1u) << "Bob's host waiter is not Alice's to see";
  EXPECT_EQ(alices.at("device:0").calls, 2u);
  EXPECT_EQ(alices.at("device:0").bytes, 3 * kMiB);
  ASSERT_TRUE(queue.Remove(1));
  EXPECT_EQ(queue.ByLocation(kAlice).at("device:0").bytes, 2 * kMiB);
}

}  // namespace
}  // namespace memd::broker
