#include "daemon/pool/arenas.h"

#include <algorithm>
#include <thread>

#include "gtest/gtest.h"

namespace memd::pool {
namespace {

const Domain kAlice{1000, 100, 0600};
const Domain kBob{1001, 100, 0600};

TEST(ArenasTest, OneArenaPerDomainMadeOnFirstUse) {
  Arenas arenas(/*classes=*/3);
  EXPECT_TRUE(arenas.All().empty());
  Arena& alice = arenas.For(kAlice);
  EXPECT_EQ(&arenas.For(kAlice), &alice);
  Arena& bob = arenas.For(kBob);
  EXPECT_NE(&bob, &alice);
  EXPECT_EQ(&arenas.For(kAlice), &alice);
  EXPECT_EQ(alice.domain, kAlice);
  EXPECT_EQ(alice.caches.size(), 3u);
  auto all = arenas.All();
  EXPECT_EQ(all.size(), 2u);
  EXPECT_NE(std::find(all.begin(), all.end(), &bob), all.end());
}

TEST(ArenasTest, AThreadsLastLookupNeverAnswersForAnotherPool) {
  Arenas first(1);
  Arenas second(1);
  Arena& mine = first.For(kAlice);
  Arena& theirs = second.For(kAlice);  // Same domain, same thread.
  EXPECT_NE(&mine, &theirs);
  EXPECT_EQ(&first.For(kAlice), &mine);
}

TEST(ArenasTest, ThreadsFindTheSameArena) {
  Arenas arenas(1);
  Arena* seen[2] = {nullptr, nullptr};
  std::thread a([&] { seen[0] = &arenas.For(kAlice); });
  std::thread b([&] { seen[1] = &arenas.For(kAlice); });
  a.join();
  b.join();
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(arenas.All().size(), 1u);
}

}  // namespace
}  // namespace memd::pool
