// HostBackend::Adopt: a memfd an earlier memd reserved, taken back as the
// same memory and checked to be what Reserve makes.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/unix_socket.h"
#include "daemon/backend/host/host_backend.h"
#include "daemon/backend/host/memfd_segment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::backend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

UniqueFd Dup(int fd) { return UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

// The daemon's mapping of a segment.
std::byte* Bytes(const Segment& segment) {
  auto memory = segment.Memory();
  EXPECT_TRUE(memory.ok()) << memory.status();
  return memory.ok() ? memory->host : nullptr;
}

// A memfd of `bytes` with `seals` (and MFD_ALLOW_SEALING when `sealable`).
UniqueFd Memfd(std::uint64_t bytes, int seals, bool sealable = true) {
  UniqueFd fd(::memfd_create("test", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0)));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
  if (seals != 0) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

// Kilobytes of this process's locked memory (VmLck).
std::uint64_t LockedKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmLck:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

TEST(HostAdoptTest, AdoptedSegmentIsTheSameMemoryAndExportsItsDescriptor) {
  HostBackend backend;
  UniqueFd kept;
  {
    auto segment = backend.Reserve(Location::Host(), kMiB);
    ASSERT_TRUE(segment.ok()) << segment.status();
    std::memcpy(Bytes(**segment) + 4096, "memd", 4);
    auto exported = (*segment)->Export(Access::kReadWrite);
    ASSERT_TRUE(exported.ok());
    EXPECT_EQ((*segment)->DurableFd(), exported->fd);
    kept = Dup((*segment)->DurableFd());
  }  // The first segment is gone; the descriptor keeps the memory.
  const int number = kept.get();
  auto adopted = backend.Adopt(Location::Host(), kMiB, std::move(kept));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ((*adopted)->size(), kMiB);
  EXPECT_EQ(std::memcmp(Bytes(**adopted) + 4096, "memd", 4), 0);
  EXPECT_EQ((*adopted)->DurableFd(), number);

  auto read_write = (*adopted)->Export(Access::kReadWrite);
  ASSERT_TRUE(read_write.ok());
  EXPECT_EQ(read_write->type, HandleType::kHostMemfd);
  EXPECT_EQ(read_write->fd, number);
  // The read-only export is as Reserve's: shares the bytes, refuses writing.
  auto read_only = (*adopted)->Export(Access::kRead);
  ASSERT_TRUE(read_only.ok());
  EXPECT_NE(read_only->fd, number);
  EXPECT_EQ(::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, read_only->fd, 0),
            MAP_FAILED);
  void* view = ::mmap(nullptr, kMiB, PROT_READ, MAP_SHARED, read_only->fd, 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_EQ(std::memcmp(static_cast<char*>(view) + 4096, "memd", 4), 0);
  ::munmap(view, kMiB);
  // Still sealed and still without permission bits.
  EXPECT_EQ(::fcntl(number, F_GET_SEALS), MemfdSegment::kSeals);
  struct stat info;
  ASSERT_EQ(::fstat(number, &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0u);
  // Scrub works on it as on any segment.
  ASSERT_TRUE((*adopted)->Scrub().ok());
  EXPECT_EQ(Bytes(**adopted)[4096], std::byte{0});
}

TEST(HostAdoptTest, AdoptsTheMemfdOfAProcessThatDied) {
  int sockets[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
  UniqueFd ours(sockets[0]), theirs(sockets[1]);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    HostBackend backend;
    auto segment = backend.Reserve(Location::Host(), 2 * kMiB);
    if (!segment.ok()) ::_exit(10);
    std::memcpy((*segment)->Memory()->host + kMiB, "alive", 5);
    if (!SendPacket(theirs.get(), "segment", (*segment)->DurableFd()).ok()) ::_exit(11);
    ::_exit(0);  // Without destroying anything.
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto packet = ReceivePacket(ours.get(), 64);
  ASSERT_TRUE(packet.ok() && packet->has_value()) << packet.status();
  HostBackend backend;
  auto adopted = backend.Adopt(Location::Host(), 2 * kMiB, std::move((*packet)->fd));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(std::memcmp(Bytes(**adopted) + kMiB, "alive", 5), 0);
}

TEST(HostAdoptTest, WrongSizeIsInvalidArgumentWithBothNumbers) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok());
  auto adopted = backend.Adopt(Location::Host(), 2 * kMiB, Dup((*segment)->DurableFd()));
  EXPECT_EQ(adopted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(adopted.status().message(),
              AllOf(HasSubstr(std::to_string(kMiB)), HasSubstr(std::to_string(2 * kMiB))));
  // Sizes Reserve refuses are refused before the descriptor is looked at.
  EXPECT_EQ(backend.Adopt(Location::Host(), 0, Dup((*segment)->DurableFd())).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      backend.Adopt(Location::Host(), 4097, Dup((*segment)->DurableFd())).status().code(),
      absl::StatusCode::kInvalidArgument);
  auto device = backend.Adopt(Location::Device(0), kMiB, Dup((*segment)->DurableFd()));
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(device.status().message(), HasSubstr("device:0"));
}

TEST(HostAdoptTest, ADescriptorThatIsNoMemfdIsInvalidArgument) {
  HostBackend backend;
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd write_end(pipe_fds[1]);
  auto pipe = backend.Adopt(Location::Host(), kMiB, UniqueFd(pipe_fds[0]));
  EXPECT_EQ(pipe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pipe.status().message(), HasSubstr("not a memfd"));

  char path[] = "/tmp/memd-adopt-XXXXXX";
  UniqueFd file(::mkostemp(path, O_CLOEXEC));
  ASSERT_TRUE(file.valid());
  ::unlink(path);
  ASSERT_EQ(::ftruncate(file.get(), kMiB), 0);
  auto regular = backend.Adopt(Location::Host(), kMiB, std::move(file));
  EXPECT_EQ(regular.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(regular.status().message(), HasSubstr("not a memfd"));
}

TEST(HostAdoptTest, AMemfdWithoutReservesSealsIsInvalidArgument) {
  HostBackend backend;
  // Growable: a client could change it under the daemon.
  auto shrink_only = backend.Adopt(Location::Host(), kMiB, Memfd(kMiB, F_SEAL_SHRINK));
  EXPECT_EQ(shrink_only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shrink_only.status().message(), HasSubstr("seals"));
  // Never sealable (its seals are just F_SEAL_SEAL).
  auto unsealed = backend.Adopt(Location::Host(), kMiB, Memfd(kMiB, 0, /*sealable=*/false));
  EXPECT_EQ(unsealed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unsealed.status().message(), HasSubstr("seals"));
  // Write-sealed: the daemon could not map it writable.
  auto write_sealed = backend.Adopt(Location::Host(), kMiB,
                                    Memfd(kMiB, MemfdSegment::kSeals | F_SEAL_WRITE));
  EXPECT_EQ(write_sealed.status().code(), absl::StatusCode::kInvalidArgument);
  // With exactly Reserve's seals any memfd will do (what memd wrote is the
  // caller's to check).
  EXPECT_TRUE(backend.Adopt(Location::Host(), kMiB, Memfd(kMiB, MemfdSegment::kSeals)).ok());
}

TEST(HostAdoptTest, AReadOnlyDescriptorIsInvalidArgument) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(segment.ok());
  auto exported = (*segment)->Export(Access::kRead);
  ASSERT_TRUE(exported.ok());
  auto adopted = backend.Adopt(Location::Host(), kMiB, Dup(exported->fd));
  EXPECT_EQ(adopted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(adopted.status().message(), HasSubstr("read-write"));
}

TEST(HostAdoptTest, PinnedIsLockedAgainAsReserveLocksIt) {
  HostBackend backend;
  auto segment = backend.Reserve(Location::Pinned(), kMiB);
  if (!segment.ok() && absl::IsResourceExhausted(segment.status())) {
    GTEST_SKIP() << "RLIMIT_MEMLOCK too small here: " << segment.status();
  }
  ASSERT_TRUE(segment.ok()) << segment.status();
  std::memcpy(Bytes(**segment), "pinned", 6);
  UniqueFd kept = Dup((*segment)->DurableFd());
  segment->reset();
  const std::uint64_t before = LockedKiB();
  auto adopted = backend.Adopt(Location::Pinned(), kMiB, std::move(kept));
  if (!adopted.ok() && absl::IsResourceExhausted(adopted.status())) {
    GTEST_SKIP() << "RLIMIT_MEMLOCK too small here: " << adopted.status();
  }
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(std::memcmp(Bytes(**adopted), "pinned", 6), 0);
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer ignores mlock.
  EXPECT_GE(LockedKiB() - before, kMiB / 1024);
#endif
  (void)before;
}

}  // namespace
}  // namespace memd::backend
