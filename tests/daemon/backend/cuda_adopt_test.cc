// CudaBackend::Adopt over the project's fake CUDA driver (tests/fake_cuda):
// a VMM segment made by a process that then died, taken back from its fd.
// The fake, like the real driver, refuses to export an imported allocation
// again, so an adopted segment that re-exported would fail here.

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/cuda/driver.h"
#include "common/cuda/scoped_context.h"
#include "common/unix_socket.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/backend/vmm_import.h"

namespace memd::backend {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr char kPattern[] = "adopted";

std::shared_ptr<const cuda::Driver> LoadFakeWithOneDevice() {
  for (const char* name : {"MEMD_FAKE_CUDA_MEMORY", "MEMD_FAKE_CUDA_VMM",
                           "MEMD_FAKE_CUDA_INIT_ERROR", "CUDA_VISIBLE_DEVICES"}) {
    ::unsetenv(name);
  }
  ::setenv("MEMD_FAKE_CUDA_DEVICES", "1", 1);
  // MEMD_ADOPT_TEST_DRIVER=libcuda.so.1 runs these tests on a real GPU (one
  // test per process: the child must fork before the driver is loaded).
  const char* real = std::getenv("MEMD_ADOPT_TEST_DRIVER");
  auto driver = cuda::Driver::Load(real != nullptr ? real : MEMD_FAKE_CUDA_PATH);
  EXPECT_TRUE(driver.ok()) << driver.status();
  return driver.ok() ? *std::move(driver) : nullptr;
}

// How many of this process's descriptors and mappings name the fake's VMM
// memory: what an adopted segment must give back when it goes.
int FakeVmmReferences() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) {
      char target[256] = {};
      const std::string link = std::string("/proc/self/fd/") + entry->d_name;
      if (::readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
          std::strstr(target, "memd-fake-cuda-vmm") != nullptr) {
        ++count;
      }
    }
    ::closedir(dir);
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memd-fake-cuda-vmm") != std::string::npos) ++count;
  }
  return count;
}

// A child process reserves `bytes` on device 0, writes kPattern at `offset`,
// sends the segment's durable fd over a socket and exits without tearing
// anything down. Returns the fd it sent.
UniqueFd SegmentOfADeadProcess(std::uint64_t bytes, std::uint64_t offset) {
  int sockets[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
  UniqueFd ours(sockets[0]), theirs(sockets[1]);
  pid_t child = ::fork();
  EXPECT_GE(child, 0);
  if (child == 0) {
    auto driver = LoadFakeWithOneDevice();
    if (driver == nullptr) ::_exit(10);
    auto backend = CudaBackend::Create(driver, CudaHandles::kVmmFd);
    if (!backend.ok()) ::_exit(11);
    auto segment = (*backend)->Reserve(Location::Device(0), bytes);
    if (!segment.ok()) ::_exit(12);
    auto memory = (*segment)->Memory();
    CUcontext context;
    if (!memory.ok() || driver->api().DevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS ||
        driver->api().CtxSetCurrent(context) != CUDA_SUCCESS ||
        driver->api().MemcpyHtoD(memory->device_address + offset, kPattern,
                                 sizeof(kPattern)) != CUDA_SUCCESS) {
      ::_exit(13);
    }
    if ((*segment)->DurableFd() < 0) ::_exit(14);
    if (!SendPacket(theirs.get(), "segment", (*segment)->DurableFd()).ok()) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto packet = ReceivePacket(ours.get(), 64);
  EXPECT_TRUE(packet.ok() && packet->has_value()) << packet.status();
  if (!packet.ok() || !packet->has_value()) return UniqueFd();
  return std::move((*packet)->fd);
}

// Reads `size` bytes at `address` on device 0.
std::string ReadDevice(const cuda::Driver& driver, CUdeviceptr address, std::size_t size) {
  CUcontext context;
  EXPECT_EQ(driver.api().DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  std::string text(size, '\0');
  {
    cuda::ScopedContext current(driver, context);
    EXPECT_EQ(driver.api().MemcpyDtoH(text.data(), address, size), CUDA_SUCCESS);
  }
  driver.api().DevicePrimaryCtxRelease(0);
  return text;
}

TEST(CudaAdoptTest, AdoptsTheVmmSegmentOfAProcessThatDied) {
  UniqueFd fd = SegmentOfADeadProcess(4 * kMiB, 3 * kMiB);
  ASSERT_TRUE(fd.valid());
  auto driver = LoadFakeWithOneDevice();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  // The fake's memory is memfds this process can count; the real driver's
  // descriptors are /dev/nvidiactl, which it holds for itself too.
  const bool fake = std::getenv("MEMD_ADOPT_TEST_DRIVER") == nullptr;
  const int baseline = fake ? FakeVmmReferences() - 1 : 0;  // Without `fd`.
  ASSERT_GE(baseline, 0) << "the fake's memfd names changed";
  const int number = fd.get();
  {
    auto adopted = (*backend)->Adopt(Location::Device(0), 4 * kMiB, std::move(fd));
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_EQ((*adopted)->size(), 4 * kMiB);
    EXPECT_EQ((*adopted)->DurableFd(), number);
    auto memory = (*adopted)->Memory();
    ASSERT_TRUE(memory.ok()) << memory.status();
    EXPECT_EQ(memory->device, 0);
    EXPECT_EQ(ReadDevice(*driver, memory->device_address + 3 * kMiB, sizeof(kPattern)),
              std::string(kPattern, sizeof(kPattern)));

    // Export hands out the adopted descriptor (never exporting again, which
    // the driver refuses), and importing it reaches the same memory.
    auto handle = (*adopted)->Export(Access::kReadWrite);
    ASSERT_TRUE(handle.ok()) << handle.status();
    EXPECT_EQ(handle->type, HandleType::kCudaVmmFd);
    EXPECT_EQ(handle->fd, number);
    const cuda::DriverApi& api = driver->api();
    {
      VmmImport imported(api, handle->fd, 4 * kMiB);
      ASSERT_TRUE(imported.ok());
      EXPECT_EQ(ReadDevice(*driver, imported.address() + 3 * kMiB, sizeof(kPattern)),
                std::string(kPattern, sizeof(kPattern)));
    }

    // Scrub works on adopted memory as on any.
    ASSERT_TRUE((*adopted)->Scrub().ok());
    EXPECT_EQ(ReadDevice(*driver, memory->device_address + 3 * kMiB, 4),
              std::string(4, '\0'));
  }
  // Destroyed: unmapped, released, its descriptor closed; nothing of the
  // memory is left in this process.
  EXPECT_EQ(::fcntl(number, F_GETFD), -1);
  if (fake) {
    EXPECT_EQ(FakeVmmReferences(), baseline);
  }
}

TEST(CudaAdoptTest, BadLocationsAndSizesAreInvalidArgument) {
  UniqueFd fd = SegmentOfADeadProcess(2 * kMiB, 0);
  ASSERT_TRUE(fd.valid());
  auto driver = LoadFakeWithOneDevice();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto dup = [&] { return UniqueFd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0)); };

  auto unknown = (*backend)->Adopt(Location::Device(3), 2 * kMiB, dup());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("no CUDA device 3"));
  auto unaligned = (*backend)->Adopt(Location::Device(0), 3 * kMiB / 2, dup());
  EXPECT_EQ(unaligned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unaligned.status().message(), HasSubstr("granularity"));
  // Larger than the allocation: the driver refuses to map it.
  auto larger = (*backend)->Adopt(Location::Device(0), 4 * kMiB, dup());
  EXPECT_EQ(larger.status().code(), absl::StatusCode::kInvalidArgument) << larger.status();
  EXPECT_THAT(larger.status().message(), HasSubstr("cuMemMap"));
  // A host segment's memfd is no VMM allocation: the driver says so, and
  // the message names the likely cause after a restart.
  auto host = (*backend)->Reserve(Location::Host(), 2 * kMiB);
  ASSERT_TRUE(host.ok());
  auto memfd = (*backend)->Adopt(Location::Device(0), 2 * kMiB,
                                 UniqueFd(::fcntl((*host)->DurableFd(), F_DUPFD_CLOEXEC, 0)));
  EXPECT_EQ(memfd.status().code(), absl::StatusCode::kInvalidArgument) << memfd.status();
  EXPECT_THAT(memfd.status().message(),
              HasSubstr("cuMemImportFromShareableHandle"));
  EXPECT_THAT(memfd.status().message(), HasSubstr("reloaded"));
  // And the right request still works.
  EXPECT_TRUE((*backend)->Adopt(Location::Device(0), 2 * kMiB, dup()).ok());
}

TEST(CudaAdoptTest, PinnedIsRegisteredAgainAndHostIsAsTheHostBackend) {
  auto driver = LoadFakeWithOneDevice();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (const Location& location : {Location::Pinned(), Location::Host()}) {
    auto segment = (*backend)->Reserve(location, kMiB);
    ASSERT_TRUE(segment.ok()) << segment.status();
    std::memcpy((*segment)->Memory()->host, kPattern, sizeof(kPattern));
    UniqueFd kept(::fcntl((*segment)->DurableFd(), F_DUPFD_CLOEXEC, 0));
    segment->reset();  // Unregistered and unmapped; the memfd lives on.
    auto adopted = (*backend)->Adopt(location, kMiB, std::move(kept));
    ASSERT_TRUE(adopted.ok()) << location.ToString() << ": " << adopted.status();
    auto memory = (*adopted)->Memory();
    ASSERT_TRUE(memory.ok());
    EXPECT_EQ(memory->registered, location == Location::Pinned()) << location.ToString();
    EXPECT_EQ(std::memcmp(memory->host, kPattern, sizeof(kPattern)), 0);
    auto handle = (*adopted)->Export(Access::kReadWrite);
    ASSERT_TRUE(handle.ok());
    EXPECT_EQ(handle->type, HandleType::kHostMemfd);
    EXPECT_EQ(handle->fd, (*adopted)->DurableFd());
  }
}

TEST(CudaAdoptTest, LegacyIpcSegmentsHaveNoDurableDescriptor) {
  auto driver = LoadFakeWithOneDevice();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kIpc);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto segment = (*backend)->Reserve(Location::Device(0), 2 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ((*segment)->DurableFd(), -1);
}

}  // namespace
}  // namespace memd::backend
