// The CUDA backend over the project's fake CUDA driver (tests/fake_cuda):
// real driver calls, real memfds underneath, a second process importing.

#include "daemon/backend/cuda/cuda_backend.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/cuda/driver.h"
#include "common/cuda/scoped_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/backend/vmm_import.h"

namespace memd::backend {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

// Loads a fresh fake (its state lives while the library is loaded, and the
// MEMD_FAKE_CUDA_* variables are read at its cuInit).
std::shared_ptr<const cuda::Driver> LoadFake(
    std::vector<std::pair<const char*, const char*>> environment = {}) {
  for (const char* name : {"MEMD_FAKE_CUDA_DEVICES", "MEMD_FAKE_CUDA_MEMORY",
                           "MEMD_FAKE_CUDA_VMM", "MEMD_FAKE_CUDA_INIT_ERROR",
                           "CUDA_VISIBLE_DEVICES"}) {
    ::unsetenv(name);
  }
  for (auto [name, value] : environment) ::setenv(name, value, 1);
  auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
  EXPECT_TRUE(driver.ok()) << driver.status();
  return driver.ok() ? *std::move(driver) : nullptr;
}

// In a child process: loads its own fake, imports `fd` (a VMM export) on
// device 0 and checks the first bytes read "memd". Exit 0 when they do.
int ImportInChild(int fd, std::uint64_t bytes) {
  pid_t child = ::fork();
  if (child != 0) {
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
  }
  auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
  if (!driver.ok()) ::_exit(10);
  const cuda::DriverApi& api = (*driver)->api();
  CUcontext context;
  if (api.DevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS ||
      api.CtxSetCurrent(context) != CUDA_SUCCESS) {
    ::_exit(11);
  }
  CUmemGenericAllocationHandle handle;
  if (api.MemImportFromShareableHandle(&handle, reinterpret_cast<void*>(
                                                    static_cast<std::uintptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) !=
      CUDA_SUCCESS) {
    ::_exit(12);
  }
  CUdeviceptr address;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (api.MemAddressReserve(&address, bytes, 0, 0, 0) != CUDA_SUCCESS ||
      api.MemMap(address, bytes, 0, handle, 0) != CUDA_SUCCESS ||
      api.MemSetAccess(address, bytes, &access, 1) != CUDA_SUCCESS) {
    ::_exit(13);
  }
  char text[5] = {};
  if (api.MemcpyDtoH(text, address, 4) != CUDA_SUCCESS) ::_exit(14);
  ::_exit(std::strcmp(text, "memd") == 0 ? 0 : 15);
}

TEST(CudaBackendTest, FindsTheDevicesWithTheirPropertiesAndLocations) {
  auto driver = LoadFake({{"MEMD_FAKE_CUDA_DEVICES", "2"},
                          {"MEMD_FAKE_CUDA_MEMORY", "268435456"}});
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cuda");
  EXPECT_THAT((*backend)->locations(),
              ::testing::ElementsAre(Location::Host(), Location::Pinned(),
                                     Location::Device(0), Location::Device(1)));
  std::vector<DeviceInfo> devices = (*backend)->devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].ordinal, 1);
  EXPECT_EQ(devices[1].name, "memd fake GPU 1");
  EXPECT_THAT(devices[0].uuid, ::testing::MatchesRegex(
                                   "GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
  EXPECT_NE(devices[0].uuid, devices[1].uuid);
  EXPECT_EQ(devices[0].total_bytes, 256 * kMiB);
  EXPECT_EQ(devices[0].free_bytes, 256 * kMiB);
  EXPECT_TRUE(devices[0].vmm);
  EXPECT_TRUE(devices[0].posix_fd);
  EXPECT_EQ(devices[0].handle_type, HandleType::kCudaVmmFd);
  EXPECT_EQ((*backend)->alignment(Location::Device(0)), 2 * kMiB);
  EXPECT_EQ((*backend)->alignment(Location::Host()), 4096u);
}

TEST(CudaBackendTest, DeviceSegmentExportsAnFdAnotherProcessImports) {
  auto driver = LoadFake();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto segment = (*backend)->Reserve(Location::Device(0), 4 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto handle = (*segment)->Export(Access::kReadWrite);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->type, HandleType::kCudaVmmFd);
  ASSERT_GE(handle->fd, 0);
  EXPECT_LT((*backend)->devices()[0].free_bytes, 1024 * kMiB);  // Counted.

  // Write through a second import in this process, read in another one.
  const cuda::DriverApi& api = driver->api();
  CUcontext context;
  ASSERT_EQ(api.DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  cuda::ScopedContext current(*driver, context);
  {
    VmmImport imported(api, handle->fd, 4 * kMiB);
    ASSERT_TRUE(imported.ok());
    const CUdeviceptr address = imported.address();
    ASSERT_EQ(api.MemcpyHtoD(address, "memd", 4), CUDA_SUCCESS);
    EXPECT_EQ(ImportInChild(handle->fd, 4 * kMiB), 0);

    // Scrub zeroes it (what a segment changing domain gets).
    ASSERT_TRUE((*segment)->Scrub().ok());
    char text[4] = {1, 1, 1, 1};
    ASSERT_EQ(api.MemcpyDtoH(text, address, 4), CUDA_SUCCESS);
    EXPECT_EQ(std::string(text, 4), std::string(4, '\0'));
  }
  api.DevicePrimaryCtxRelease(0);
}

TEST(CudaBackendTest, WithoutVmmFdsDevicesGetLegacyIpcHandles) {
  auto driver = LoadFake({{"MEMD_FAKE_CUDA_VMM", "0"}});
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->devices()[0].handle_type, HandleType::kCudaIpc);
  auto segment = (*backend)->Reserve(Location::Device(0), 2 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto handle = (*segment)->Export(Access::kRead);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->type, HandleType::kCudaIpc);
  EXPECT_EQ(handle->fd, -1);
  EXPECT_EQ(handle->opaque.size(), static_cast<std::size_t>(CU_IPC_HANDLE_SIZE));

  // Asking for VMM fds where none can be exported refuses, saying why.
  auto forced = CudaBackend::Create(driver, CudaHandles::kVmmFd);
  EXPECT_EQ(forced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(forced.status().message(), HasSubstr("cannot export VMM memory"));
}

TEST(CudaBackendTest, IpcCanBeChosenEvenWhereVmmWorks) {
  auto driver = LoadFake();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kIpc);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto segment = (*backend)->Reserve(Location::Device(0), 2 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_EQ((*segment)->Export(Access::kRead)->type, HandleType::kCudaIpc);
}

TEST(CudaBackendTest, ALegacyIpcSegmentNeverChangesDomain) {
  // Its handle is bytes that open it for as long as it lives: the pool must
  // free it rather than scrub it for another domain.
  auto driver = LoadFake();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kIpc);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto segment = (*backend)->Reserve(Location::Device(0), 2 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  absl::Status scrubbed = (*segment)->Scrub();
  EXPECT_EQ(scrubbed.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(scrubbed.message(), HasSubstr("never changes domain"));
}

TEST(CudaBackendTest, OutOfDeviceMemoryIsResourceExhaustedNamingTheCallAndDevice) {
  auto driver = LoadFake({{"MEMD_FAKE_CUDA_MEMORY", "8388608"}});
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok());
  auto held = (*backend)->Reserve(Location::Device(0), 6 * kMiB);
  ASSERT_TRUE(held.ok()) << held.status();
  auto failed = (*backend)->Reserve(Location::Device(0), 4 * kMiB);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("cuMemCreate failed on device 0"));
  EXPECT_THAT(failed.status().message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
}

TEST(CudaBackendTest, BadRequestsAreInvalidArgument) {
  auto driver = LoadFake();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok());
  auto unaligned = (*backend)->Reserve(Location::Device(0), kMiB);
  EXPECT_EQ(unaligned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unaligned.status().message(), HasSubstr("granularity"));
  auto absent = (*backend)->Reserve(Location::Device(3), 2 * kMiB);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(absent.status().message(), HasSubstr("no CUDA device 3"));
}

TEST(CudaBackendTest, PinnedSegmentIsRegisteredSharedMemory) {
  auto driver = LoadFake();
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok());
  auto segment = (*backend)->Reserve(Location::Pinned(), kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  auto handle = (*segment)->Export(Access::kReadWrite);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(handle->type, HandleType::kHostMemfd);
  EXPECT_GE(handle->fd, 0);
  // Freeing it unregisters it: a second pinned segment registers fine, and
  // tearing both down raises no driver error in the sanitizer build.
  auto another = (*backend)->Reserve(Location::Pinned(), kMiB);
  EXPECT_TRUE(another.ok()) << another.status();
}

TEST(CudaBackendTest, ADriverWithoutDevicesIsRefusedWithTheReason) {
  auto driver = LoadFake({{"MEMD_FAKE_CUDA_DEVICES", "0"}});
  ASSERT_NE(driver, nullptr);
  auto backend = CudaBackend::Create(driver, CudaHandles::kAuto);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(), HasSubstr("sees no device"));
}

TEST(CudaDriverTest, MissingDriverOrFailedInitIsUnavailableSayingWhy) {
  auto missing = cuda::Driver::Load("/nonexistent/libcuda.so.1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot load /nonexistent/libcuda.so.1"));

  ::setenv("MEMD_FAKE_CUDA_INIT_ERROR", "100", 1);  // CUDA_ERROR_NO_DEVICE
  auto failed = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
  ::unsetenv("MEMD_FAKE_CUDA_INIT_ERROR");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("cuInit failed: CUDA_ERROR_NO_DEVICE"));
}

}  // namespace
}  // namespace memd::backend
