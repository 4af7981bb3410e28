#include "daemon/pool/limited_backend.h"

#include <fcntl.h>

#include <memory>

#include "daemon/backend/host/host_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"

namespace memd::pool {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

class LimitedBackendTest : public ::testing::Test {
 protected:
  test::FakeBackend inner_{test::FakeBackend::Memory::kHollow};
  LimitedBackend limited_{inner_, 16 * kMiB};
};

TEST_F(LimitedBackendTest, ReservesWithinTheLimitAndCountsWhatIsAlive) {
  auto a = limited_.Reserve(Location::Host(), 8 * kMiB);
  auto b = limited_.Reserve(Location::Host(), 8 * kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(limited_.reserved_bytes(), 16 * kMiB);
  EXPECT_EQ(limited_.segments(), 2u);
  EXPECT_EQ(inner_.alive_bytes(), 16 * kMiB);
  a->reset();
  EXPECT_EQ(limited_.reserved_bytes(), 8 * kMiB);
  EXPECT_EQ(limited_.segments(), 1u);
  EXPECT_EQ(limited_.peak_reserved_bytes(), 16 * kMiB);
  EXPECT_EQ(inner_.alive_bytes(), 8 * kMiB);
}

TEST_F(LimitedBackendTest, BeyondTheLimitIsARefusalWithTheNumbers) {
  auto held = limited_.Reserve(Location::Host(), 12 * kMiB);
  ASSERT_TRUE(held.ok());
  auto refused = limited_.Reserve(Location::Host(), 8 * kMiB);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(LimitedBackend::IsLimitRefusal(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("host pool"));
  EXPECT_THAT(refused.status().message(), HasSubstr("8388608"));   // Asked.
  EXPECT_THAT(refused.status().message(), HasSubstr("16777216"));  // Limit.
  EXPECT_THAT(refused.status().message(), HasSubstr("12582912"));  // Reserved.
  EXPECT_EQ(limited_.reserved_bytes(), 12 * kMiB);
  EXPECT_EQ(inner_.alive(), 1) << "the inner backend was not asked";
}

TEST_F(LimitedBackendTest, ASizeThatOverflowsTheCountIsRefused) {
  LimitedBackend unlimited(inner_, ~std::uint64_t{0});
  auto held = unlimited.Reserve(Location::Host(), 8 * kMiB);
  ASSERT_TRUE(held.ok());
  auto refused = unlimited.Reserve(Location::Host(), ~std::uint64_t{0} - kMiB);
  EXPECT_TRUE(LimitedBackend::IsLimitRefusal(refused.status()));
  EXPECT_EQ(unlimited.reserved_bytes(), 8 * kMiB);
}

TEST_F(LimitedBackendTest, InnerFailuresPassThroughUncountedAndAreNoRefusal) {
  inner_.FailNextReserve(absl::ResourceExhaustedError("fake: out of memory"));
  auto failed = limited_.Reserve(Location::Host(), 4 * kMiB);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("fake: out of memory"));
  EXPECT_FALSE(LimitedBackend::IsLimitRefusal(failed.status()));
  EXPECT_EQ(limited_.reserved_bytes(), 0u);
  EXPECT_EQ(limited_.segments(), 0u);
}

TEST_F(LimitedBackendTest, SegmentsForwardToTheInnerOnes) {
  auto segment = limited_.Reserve(Location::Host(), 4 * kMiB);
  ASSERT_TRUE(segment.ok());
  EXPECT_EQ((*segment)->size(), 4 * kMiB);
  EXPECT_TRUE((*segment)->Scrub().ok());
  (*segment)->Discard();
  EXPECT_EQ(inner_.scrubs(), 1);
  EXPECT_EQ(inner_.discards(), 1);
  // A hollow fake segment has no memory to export: the inner error shows.
  EXPECT_EQ((*segment)->Export(backend::Access::kRead).status().code(),
            absl::StatusCode::kInternal);
}

TEST_F(LimitedBackendTest, ASegmentMayOutliveTheLimitedBackend) {
  std::unique_ptr<backend::Segment> segment;
  {
    LimitedBackend scoped(inner_, 16 * kMiB);
    auto reserved = scoped.Reserve(Location::Host(), 4 * kMiB);
    ASSERT_TRUE(reserved.ok());
    segment = std::move(*reserved);
  }
  segment.reset();
  EXPECT_EQ(inner_.alive(), 0);
}

}  // namespace
}  // namespace memd::pool

namespace memd::pool {
namespace {

// Adoption is counted like a reservation: through the layer (Adopt) or for
// a segment adopted elsewhere (Count); but never refused by the limit, since
// the memory exists already and holds a previous memd's buffers.
TEST(LimitedBackendAdoptTest, AdoptedSegmentsAreCountedEvenPastTheLimit) {
  backend::HostBackend host;
  LimitedBackend limited(host, 3 * kMiB);
  auto original = host.Reserve(Location::Host(), 2 * kMiB);
  ASSERT_TRUE(original.ok());
  const int fd = (*original)->DurableFd();
  auto adopted = limited.Adopt(Location::Host(), 2 * kMiB,
                               UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(limited.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(limited.segments(), 1u);
  EXPECT_GE((*adopted)->DurableFd(), 0);  // Forwarded by the counting layer.
  // The inner backend's refusal counts nothing.
  auto wrong = limited.Adopt(Location::Host(), kMiB, UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limited.reserved_bytes(), 2 * kMiB);

  // Past the limit (a limit lowered across a restart): counted all the
  // same, and a reservation is refused until the layer is back under it.
  auto elsewhere = host.Reserve(Location::Host(), 2 * kMiB);
  ASSERT_TRUE(elsewhere.ok());
  std::shared_ptr<backend::Segment> counted = limited.Count(std::move(*elsewhere));
  EXPECT_EQ(limited.reserved_bytes(), 4 * kMiB);
  EXPECT_EQ(limited.segments(), 2u);
  EXPECT_EQ(limited.peak_reserved_bytes(), 4 * kMiB);
  auto refused = limited.Reserve(Location::Host(), kMiB);
  EXPECT_TRUE(LimitedBackend::IsLimitRefusal(refused.status())) << refused.status();
  counted.reset();
  auto fits = limited.Reserve(Location::Host(), kMiB);
  EXPECT_TRUE(fits.ok()) << fits.status();
  fits->reset();
  adopted->reset();
  EXPECT_EQ(limited.reserved_bytes(), 0u);
  EXPECT_EQ(limited.segments(), 0u);
}

}  // namespace
}  // namespace memd::pool
