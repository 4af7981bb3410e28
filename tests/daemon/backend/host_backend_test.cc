#include "daemon/backend/host/host_backend.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/numa.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::backend {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::uint64_t kMiB = 1 << 20;

std::string LinkOf(int fd) {
  char target[256] = {};
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  ssize_t length = ::readlink(path.c_str(), target, sizeof(target) - 1);
  return length > 0 ? std::string(target, length) : "";
}

TEST(HostBackendTest, ServesHostAndPinnedAtPageAlignment) {
  HostBackend backend;
  EXPECT_EQ(backend.name(), "host");
  EXPECT_THAT(backend.locations(),
              ::testing::ElementsAre(Location::Host(), Location::Pinned()));
  EXPECT_EQ(backend.alignment(Location::Host()),
            static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(HostBackendTest, SegmentIsASealedAnonymousMemfdOfTheRightSize) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ((*segment)->size(), kMiB);
  auto fd = (*segment)->Export(Access::kReadWrite);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(fd->type, HandleType::kHostMemfd);
  ASSERT_TRUE(fd.ok()) << fd.status();
  struct stat info;
  ASSERT_EQ(::fstat(fd->fd, &info), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(info.st_size), kMiB);
  // Committed: fallocate allocated every block.
  EXPECT_GE(static_cast<std::uint64_t>(info.st_blocks) * 512, kMiB);
  // Not a file anyone could find in /dev/shm.
  EXPECT_THAT(LinkOf(fd->fd), StartsWith("/memfd:memd:host"));

  int seals = ::fcntl(fd->fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  // A client holding the descriptor can neither shrink nor grow it...
  EXPECT_EQ(::ftruncate(fd->fd, 4096), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(fd->fd, 2 * kMiB), -1);
  EXPECT_EQ(errno, EPERM);
  // ...nor add a seal that would break the daemon's reuse of it.
  EXPECT_EQ(::fcntl(fd->fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
}

TEST(HostBackendTest, ReadOnlyExportSharesBytesButRefusesWritableMappings) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok());
  auto writable = (*segment)->Export(Access::kReadWrite);
  auto readable = (*segment)->Export(Access::kRead);
  ASSERT_TRUE(writable.ok() && readable.ok());

  void* write_map = ::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED,
                           writable->fd, 0);
  ASSERT_NE(write_map, MAP_FAILED);
  std::memcpy(write_map, "memd", 4);

  EXPECT_EQ(::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED,
                   readable->fd, 0),
            MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  void* read_map = ::mmap(nullptr, kMiB, PROT_READ, MAP_SHARED, readable->fd, 0);
  ASSERT_NE(read_map, MAP_FAILED);
  EXPECT_EQ(std::memcmp(read_map, "memd", 4), 0);
  // Nor can mprotect turn the read-only mapping writable.
  EXPECT_EQ(::mprotect(read_map, kMiB, PROT_READ | PROT_WRITE), -1);
  ::munmap(write_map, kMiB);
  ::munmap(read_map, kMiB);
}

TEST(HostBackendTest, NoDescriptorReopensTheMemfdWithMoreAccess) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok());
  auto readable = (*segment)->Export(Access::kRead);
  ASSERT_TRUE(readable.ok());
  struct stat info;
  ASSERT_EQ(::fstat(readable->fd, &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0u);

  // The descriptor itself writes nothing...
  const char byte = 'x';
  EXPECT_EQ(::pwrite(readable->fd, &byte, 1, 0), -1);
  EXPECT_EQ(::fallocate(readable->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                        4096),
            -1);
  EXPECT_EQ(::ftruncate(readable->fd, 0), -1);
  // ...and a process without CAP_DAC_OVERRIDE cannot reopen it writable,
  // nor give it permission bits again.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      ::_exit(10);
    }
    std::string path = "/proc/self/fd/" + std::to_string(readable->fd);
    if (::open(path.c_str(), O_RDWR) >= 0 || errno != EACCES) ::_exit(11);
    if (::fchmod(readable->fd, 0666) == 0) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(HostBackendTest, DiscardFreesThePagesWhileAClientStillHoldsTheDescriptor) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok());
  auto writable = (*segment)->Export(Access::kReadWrite);
  ASSERT_TRUE(writable.ok());
  // What a client keeps: its own descriptor and mapping.
  const int kept = ::dup(writable->fd);
  ASSERT_GE(kept, 0);
  auto* mapped = static_cast<char*>(
      ::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, kept, 0));
  ASSERT_NE(mapped, MAP_FAILED);
  std::memcpy(mapped, "memd", 4);

  (*segment)->Discard();
  segment->reset();
  struct stat info;
  ASSERT_EQ(::fstat(kept, &info), 0);
  EXPECT_EQ(info.st_blocks, 0);
  EXPECT_EQ(mapped[0], 0);
  // Touching it again allocates afresh, for the client.
  mapped[0] = 'c';
  ASSERT_EQ(::fstat(kept, &info), 0);
  EXPECT_GT(info.st_blocks, 0);
  EXPECT_LT(static_cast<std::uint64_t>(info.st_blocks) * 512, kMiB);
  ::munmap(mapped, kMiB);
  ::close(kept);
}

TEST(HostBackendTest, RejectsDeviceLocationsAndUnalignedSizes) {
  HostBackend backend;
  auto device = backend.Reserve(Location::Device(0), kMiB);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(device.status().message(), HasSubstr("device:0"));
  EXPECT_EQ(backend.Reserve(Location::Host(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.Reserve(Location::Host(), 4097).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostBackendTest, PinnedSegmentIsLockedInRam) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Pinned(), kMiB);
  if (!segment.ok() && absl::IsResourceExhausted(segment.status())) {
    GTEST_SKIP() << "RLIMIT_MEMLOCK too small here: " << segment.status();
  }
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto fd = (*segment)->Export(Access::kReadWrite);
  ASSERT_TRUE(fd.ok());
  EXPECT_THAT(LinkOf(fd->fd), StartsWith("/memfd:memd:pinned"));
}

TEST(HostBackendTest, PinnedBeyondTheMemlockLimitIsResourceExhausted) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer intercepts mlock and ignores it, so no "
                  "limit can bind here; the plain build runs this test";
#endif
  // In a child, so that lowering the limit cannot affect other tests.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{64 * 1024, 64 * 1024};
    if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) ::_exit(10);
    // Root locks past any limit (CAP_IPC_LOCK): become nobody, who cannot.
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      ::_exit(10);
    }
    HostBackend backend;
    auto segment = backend.Reserve(Location::Pinned(), 64 * kMiB);
    if (segment.ok()) ::_exit(11);  // The limit did not bind (privileged).
    bool clear = absl::IsResourceExhausted(segment.status()) &&
                 segment.status().message().find("LimitMEMLOCK") !=
                     absl::string_view::npos;
    ::_exit(clear ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 11) {
    GTEST_SKIP() << "even as uid 65534 this process locked memory beyond "
                    "RLIMIT_MEMLOCK, so the limit cannot be exercised here";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace memd::backend

namespace memd::backend {
namespace {

// The policy is the memfd's own: a fresh mapping (a client's) sees it, and
// the pages fallocate committed are on the node. This machine has node 0.
TEST(HostBackendNumaTest, ASegmentOnNodeZeroCarriesThePolicyIntoEveryMapping) {
  HostBackend backend;
  const std::uint64_t bytes = 4 * backend.alignment(Location::Host());
  for (const Location& location : {Location::Host(), Location::Pinned()}) {
    auto segment = backend.ReserveOnNode(location, bytes, 0);
    ASSERT_TRUE(segment.ok()) << segment.status();
    auto handle = (*segment)->Export(Access::kReadWrite);
    ASSERT_TRUE(handle.ok());
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, handle->fd, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    auto* bytes_of = static_cast<unsigned char*>(mapped);
    std::memset(bytes_of, 0x5a, bytes);
    EXPECT_EQ(numa::PolicyNodeOf(bytes_of + bytes - 1), 0) << location.ToString();
    EXPECT_EQ(numa::NodeOfPage(bytes_of + bytes - 1), 0) << location.ToString();
    ::munmap(mapped, bytes);
  }
}

TEST(HostBackendNumaTest, WithoutANodeTheMemfdHasTheDefaultPolicy) {
  HostBackend backend;
  const std::uint64_t bytes = backend.alignment(Location::Host());
  auto segment = backend.Reserve(Location::Host(), bytes);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto memory = (*segment)->Memory();
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(numa::PolicyNodeOf(memory->host), std::nullopt);
}

TEST(HostBackendNumaTest, ANodeTheKernelLacksIsAnErrorNotASegment) {
  HostBackend backend;
  auto segment = backend.ReserveOnNode(Location::Host(), backend.alignment(Location::Host()),
                                       numa::NodeCount() + 5);
  EXPECT_FALSE(segment.ok());
}

}  // namespace
}  // namespace memd::backend
