// pool::Allocation and pool::SegmentHold: what a pool hands out, seen from
// outside the pool (the broker's side).
#include <memory>
#include <utility>

#include "daemon/pool/pool.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"

namespace memd::pool {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

// Hands out one whole segment per allocation; enough to make allocations
// the way a pool does (Pool's protected accessors).
class SegmentPerAllocationPool : public Pool {
 public:
  explicit SegmentPerAllocationPool(backend::Backend& backend) : backend_(backend) {}

  const Location& location() const override { return location_; }
  std::uint64_t alignment() const override { return 4096; }
  absl::StatusOr<Allocation> Allocate(std::uint64_t bytes, Domain domain) override {
    auto segment = backend_.Reserve(location_, bytes);
    if (!segment.ok()) return segment.status();
    Allocation allocation;
    Attach(allocation, std::shared_ptr<backend::Segment>(std::move(*segment)), 42);
    allocation.bytes = bytes;
    allocation.domain = domain;
    return allocation;
  }
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override { return bytes; }
  void Free(Allocation allocation) override {
    EXPECT_EQ(InternalOf(allocation), 42u);
    TakeSegment(allocation).reset();
  }
  std::uint64_t Trim(absl::Duration) override { return 0; }
  PoolStats Stats() const override { return {}; }

 private:
  backend::Backend& backend_;
  const Location location_ = Location::Host();
};

TEST(AllocationTest, ADefaultAllocationHasNothingToExport) {
  Allocation none;
  EXPECT_EQ(none.Export(Access::kRead).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.segment_bytes(), 0u);
  EXPECT_FALSE(static_cast<bool>(none.Hold()));
}

TEST(AllocationTest, ExportsAHandleOfItsWholeSegment) {
  test::FakeBackend backend(test::FakeBackend::Memory::kReal);
  SegmentPerAllocationPool pool(backend);
  auto allocation = pool.Allocate(2 * kMiB, Domain{});
  ASSERT_TRUE(allocation.ok());
  EXPECT_EQ(allocation->segment_bytes(), 2 * kMiB);
  auto handle = allocation->Export(Access::kReadWrite);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_EQ(handle->type, HandleType::kHostMemfd);
  EXPECT_GE(handle->fd, 0);
  pool.Free(std::move(*allocation));
}

TEST(AllocationTest, AHoldKeepsTheSegmentAliveAfterTheFree) {
  test::FakeBackend backend(test::FakeBackend::Memory::kHollow);
  SegmentPerAllocationPool pool(backend);
  auto allocation = pool.Allocate(kMiB, Domain{});
  ASSERT_TRUE(allocation.ok());
  SegmentHold hold = allocation->Hold();
  EXPECT_TRUE(static_cast<bool>(hold));
  EXPECT_EQ(hold.use_count(), 2);  // The allocation's and the hold's.
  SegmentHold copy = hold;
  EXPECT_EQ(hold.use_count(), 3);
  pool.Free(std::move(*allocation));
  EXPECT_EQ(backend.alive(), 1);
  hold = SegmentHold();
  EXPECT_EQ(backend.alive(), 1);
  copy = SegmentHold();
  EXPECT_EQ(backend.alive(), 0);
}

}  // namespace
}  // namespace memd::pool
