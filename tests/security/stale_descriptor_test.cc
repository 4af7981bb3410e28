// Finding 4 (issue 9): a client kept a segment's descriptor; memd freed and
// trimmed the segment and forgot it, but its pages stayed allocated and
// charged to memd's cgroup, outside the pool limit (Shmem grew by ~360 MiB
// under a 64 MiB limit).

#include <sys/stat.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/daemon.h"
#include "gtest/gtest.h"
#include "tests/support/raw_session.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Bytes of memory the file behind `fd` holds now.
std::uint64_t AllocatedBytes(int fd) {
  struct stat info;
  if (::fstat(fd, &info) != 0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(info.st_blocks) * 512;
}

class StaleDescriptorTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override {
    config_.host_pool_limit_bytes = 64 * kMiB;
    StartDaemon();
  }
};

TEST_F(StaleDescriptorTest, KeptDescriptorsOfTrimmedSegmentsHoldNoMemory) {
  test::RawSession raw = test::RawSession::Open(config_.socket_dir);
  // Five times the pool limit passes through segments whose descriptors the
  // client never closes.
  constexpr int kRounds = 40;
  constexpr std::uint64_t kSize = 8 * kMiB;
  std::vector<UniqueFd> kept;
  std::uint64_t trimmed = 0;
  for (int round = 0; round < kRounds; ++round) {
    v1::CreateRequest create;
    create.set_name(absl::StrCat("stale/", round));
    create.set_size_bytes(kSize);
    v1::Lease lease;
    ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Create, create, &lease).ok()) << round;
    auto fd = raw.TakeFd(lease.handle().fd_seq());
    ASSERT_TRUE(fd.ok()) << fd.status();
    kept.push_back(std::move(*fd));

    v1::UnlinkRequest unlink;
    unlink.set_name(create.name());
    v1::UnlinkReply unlinked;
    ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Unlink, unlink, &unlinked).ok());
    v1::ReleaseRequest release;
    release.set_lease_id(lease.lease_id());
    v1::ReleaseReply released;
    ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Release, release, &released).ok());
    v1::TrimReply trim;
    ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Trim, v1::TrimRequest(), &trim).ok());
    for (const v1::TrimmedPool& pool : trim.pools()) trimmed += pool.released_bytes();
  }
  EXPECT_GE(trimmed, kRounds * kSize);

  v1::StatsReply stats;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &stats).ok());
  std::uint64_t reserved = 0;
  for (const v1::PoolStats& pool : stats.pools()) reserved += pool.reserved_bytes();
  std::uint64_t held = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::uint64_t bytes = AllocatedBytes(kept[i].get());
    EXPECT_EQ(bytes, 0u) << "segment of round " << i << " still holds memory";
    held += bytes;
  }
  // What memd is charged for is what its pools report, whatever clients keep.
  EXPECT_LE(held, reserved);
  EXPECT_LE(held, config_.host_pool_limit_bytes);
}

}  // namespace
}  // namespace memd
