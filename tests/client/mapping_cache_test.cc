#include "client/src/mapping_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace memd::internal {
namespace {

constexpr std::uint64_t kPage = 4096;

// A memfd of `bytes` to map.
int MakeMemfd(std::uint64_t bytes) {
  int fd = ::memfd_create("mapping-cache-test", MFD_CLOEXEC);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  return fd;
}

class MappingCacheTest : public ::testing::Test {
 protected:
  ~MappingCacheTest() override { ::close(fd_); }
  std::shared_ptr<Mapping> Map(MappingCache& cache, std::uint64_t id,
                               const std::string& name, bool writable = false) {
    auto mapping = cache.MapOrShare({1, id, writable}, name, fd_, 0, kPage);
    EXPECT_TRUE(mapping.ok()) << mapping.status();
    return mapping.ok() ? *mapping : nullptr;
  }
  int fd_ = MakeMemfd(kPage);
};

TEST_F(MappingCacheTest, SameKeySharesOneMapping) {
  MappingCache cache(0);
  auto a = Map(cache, 7, "a");
  auto b = Map(cache, 7, "a");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(Map(cache, 7, "a", /*writable=*/true).get(), a.get());
}

TEST_F(MappingCacheTest, ReleasedReadOnlyMappingIsRetainedAndFoundByName) {
  MappingCache cache(kPage);
  void* base = Map(cache, 7, "a")->base;  // Released at once.
  auto found = cache.FindReadOnly(1, "a");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->base, base);
  EXPECT_EQ(found->buffer_id, 7u);
  EXPECT_EQ(cache.retained_bytes(), kPage);
  EXPECT_EQ(cache.FindReadOnly(2, "a"), nullptr);  // Another generation.
  EXPECT_EQ(cache.FindReadOnly(1, "b"), nullptr);
}

TEST_F(MappingCacheTest, WithoutABudgetNothingOutlivesItsHolders) {
  MappingCache cache(0);
  std::weak_ptr<Mapping> weak = Map(cache, 7, "a");
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(cache.FindReadOnly(1, "a"), nullptr);
}

TEST_F(MappingCacheTest, WritableMappingsAreNeverRetained) {
  MappingCache cache(16 * kPage);
  std::weak_ptr<Mapping> weak = Map(cache, 7, "a", /*writable=*/true);
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(cache.retained_bytes(), 0u);
}

TEST_F(MappingCacheTest, LeastRecentlyUsedGoesFirstBeyondTheBudget) {
  MappingCache cache(2 * kPage);
  std::weak_ptr<Mapping> a = Map(cache, 1, "a");
  std::weak_ptr<Mapping> b = Map(cache, 2, "b");
  Map(cache, 1, "a");  // a is now the most recent.
  std::weak_ptr<Mapping> c = Map(cache, 3, "c");
  EXPECT_FALSE(a.expired());
  EXPECT_TRUE(b.expired());  // Evicted and unmapped.
  EXPECT_FALSE(c.expired());
  EXPECT_EQ(cache.retained_bytes(), 2 * kPage);
}

TEST_F(MappingCacheTest, EvictionNeverUnmapsWhatABufferStillHolds) {
  MappingCache cache(kPage);
  auto held = Map(cache, 1, "a");
  Map(cache, 2, "b");  // Pushes a out of the cache...
  EXPECT_EQ(cache.retained_bytes(), kPage);
  ASSERT_NE(held, nullptr);  // ...but its holder keeps it mapped.
  EXPECT_EQ(cache.FindReadOnly(1, "a"), held);
  static_cast<volatile const char*>(held->base)[0];
}

TEST_F(MappingCacheTest, TheLatestBufferOfANameWins) {
  MappingCache cache(4 * kPage);
  Map(cache, 1, "a");
  Map(cache, 2, "a");  // Unlinked and created again: a new id.
  auto found = cache.FindReadOnly(1, "a");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->buffer_id, 2u);
}

TEST_F(MappingCacheTest, MapFailureIsAnErrorAndLeavesNoEntry) {
  MappingCache cache(kPage);
  auto failed = cache.MapOrShare({1, 9, false}, "x", -1, 0, kPage);
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(cache.FindReadOnly(1, "x"), nullptr);
}

}  // namespace
}  // namespace memd::internal
