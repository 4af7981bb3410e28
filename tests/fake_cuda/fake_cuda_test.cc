// Tests for the memd FAKE CUDA driver (libmemd_fake_cuda.so), loaded the way
// memd loads a CUDA driver: dlopen(RTLD_NOW | RTLD_LOCAL) and dlsym by the
// versioned symbol names cuda.h maps the API to. Nothing is mocked: memory is
// real memfd memory, shared with real forked children.
//
// Every test gets a fresh fake: SetUp dlopens the library, TearDown dlcloses it
// and checks that it really went away (the fake keeps its state per load, and
// reads its environment at the first cuInit of a load). Children forked by a
// test reload the library too, so each process has its own fake devices.

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGranularity = 2 * kMiB;

// Every entry point of the fake, by the symbol cuda.h maps its name to.
#define FAKE_CUDA_ENTRY_POINTS(X)                                         \
  X(GetErrorString, cuGetErrorString)                                     \
  X(GetErrorName, cuGetErrorName)                                         \
  X(Init, cuInit)                                                         \
  X(DriverGetVersion, cuDriverGetVersion)                                 \
  X(DeviceGet, cuDeviceGet)                                               \
  X(DeviceGetCount, cuDeviceGetCount)                                     \
  X(DeviceGetName, cuDeviceGetName)                                       \
  X(DeviceGetUuid, cuDeviceGetUuid_v2)                                    \
  X(DeviceTotalMem, cuDeviceTotalMem_v2)                                  \
  X(DeviceGetAttribute, cuDeviceGetAttribute)                             \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)                     \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)                \
  X(DevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState)                 \
  X(CtxSetCurrent, cuCtxSetCurrent)                                       \
  X(CtxGetCurrent, cuCtxGetCurrent)                                       \
  X(CtxGetDevice, cuCtxGetDevice)                                         \
  X(MemGetInfo, cuMemGetInfo_v2)                                          \
  X(MemGetAllocationGranularity, cuMemGetAllocationGranularity)           \
  X(MemCreate, cuMemCreate)                                               \
  X(MemRelease, cuMemRelease)                                             \
  X(MemAddressReserve, cuMemAddressReserve)                               \
  X(MemAddressFree, cuMemAddressFree)                                     \
  X(MemMap, cuMemMap)                                                     \
  X(MemUnmap, cuMemUnmap)                                                 \
  X(MemSetAccess, cuMemSetAccess)                                         \
  X(MemExportToShareableHandle, cuMemExportToShareableHandle)             \
  X(MemImportFromShareableHandle, cuMemImportFromShareableHandle)         \
  X(MemAlloc, cuMemAlloc_v2)                                              \
  X(MemFree, cuMemFree_v2)                                                \
  X(IpcGetMemHandle, cuIpcGetMemHandle)                                   \
  X(IpcOpenMemHandle, cuIpcOpenMemHandle_v2)                              \
  X(IpcCloseMemHandle, cuIpcCloseMemHandle)                               \
  X(MemHostRegister, cuMemHostRegister_v2)                                \
  X(MemHostUnregister, cuMemHostUnregister)                               \
  X(MemHostGetDevicePointer, cuMemHostGetDevicePointer_v2)                \
  X(MemcpyHtoD, cuMemcpyHtoD_v2)                                          \
  X(MemcpyDtoH, cuMemcpyDtoH_v2)                                          \
  X(MemsetD8, cuMemsetD8_v2)

struct Api {
#define FAKE_CUDA_FIELD(field, symbol) decltype(&::symbol) field = nullptr;
  FAKE_CUDA_ENTRY_POINTS(FAKE_CUDA_FIELD)
#undef FAKE_CUDA_FIELD
};

constexpr const char* kEnvironment[] = {"MEMD_FAKE_CUDA_DEVICES", "MEMD_FAKE_CUDA_MEMORY",
                                        "MEMD_FAKE_CUDA_VMM", "MEMD_FAKE_CUDA_INIT_ERROR",
                                        "CUDA_VISIBLE_DEVICES"};

CUmemAllocationProp DeviceProp(
    int device, CUmemAllocationHandleType types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = types;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

CUmemAccessDesc Access(int device, CUmemAccess_flags flags) {
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = flags;
  return desc;
}

std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>((i * 31 + seed) & 0xff);
  return bytes;
}

void* AsPointer(CUdeviceptr address) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address));
}

void* AsOsHandle(int fd) { return reinterpret_cast<void*>(static_cast<uintptr_t>(fd)); }

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID and
// CUDA_VISIBLE_DEVICES takes it.
std::string UuidString(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

// Where /proc/self/fd/<fd> points: "/memfd:NAME (deleted)" for a memfd.
std::string FdTarget(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char target[256];
  const ssize_t length = readlink(path, target, sizeof(target) - 1);
  return length < 0 ? "" : std::string(target, static_cast<size_t>(length));
}

class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClearEnvironment();
    ASSERT_NO_FATAL_FAILURE(Load());
  }

  void TearDown() override {
    Unload();
    ClearEnvironment();
  }

  static void ClearEnvironment() {
    for (const char* name : kEnvironment) unsetenv(name);
  }

  // dlopens the library afresh: an uninitialised fake that reads its
  // environment at the first cuInit.
  void Load() {
    library_ = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
#define FAKE_CUDA_RESOLVE(field, symbol)                                       \
  cu.field = reinterpret_cast<decltype(cu.field)>(dlsym(library_, #symbol));   \
  ASSERT_NE(cu.field, nullptr) << "no " #symbol;
    FAKE_CUDA_ENTRY_POINTS(FAKE_CUDA_RESOLVE)
#undef FAKE_CUDA_RESOLVE
  }

  void Unload() {
    if (library_ == nullptr) return;
    ASSERT_EQ(dlclose(library_), 0) << dlerror();
    library_ = nullptr;
    cu = Api{};
    // The next Load must start a new fake: nothing may pin the library.
    void* still = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_EQ(still, nullptr) << "the fake CUDA library stayed loaded after dlclose";
    if (still != nullptr) dlclose(still);
  }

  // cuInit, then make `device`'s primary context current on this thread.
  void InitWithContext(int device = 0) {
    ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
    ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(cu.CtxSetCurrent(context_), CUDA_SUCCESS);
  }

  // Runs `body` in a forked child that reloads the library first (so the
  // child has its own, uninitialised fake, as a separate process would).
  // gtest failures in the child are printed there and fail the test here.
  void RunInChild(const std::function<void()>& body) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      Unload();
      Load();
      if (!HasFatalFailure()) body();
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(HasFailure() ? 1 : 0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child failed (status " << status << "); its output is above";
  }

  // A VMM allocation of `size` bytes on device 0, mapped read-write at *ptr.
  void CreateMapped(size_t size, CUmemGenericAllocationHandle* handle, CUdeviceptr* ptr) {
    const CUmemAllocationProp prop = DeviceProp(0);
    ASSERT_EQ(cu.MemCreate(handle, size, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemAddressReserve(ptr, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemMap(*ptr, size, 0, *handle, 0), CUDA_SUCCESS);
    const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ASSERT_EQ(cu.MemSetAccess(*ptr, size, &rw, 1), CUDA_SUCCESS);
  }

  void UnmapAndRelease(size_t size, CUmemGenericAllocationHandle handle, CUdeviceptr ptr) {
    EXPECT_EQ(cu.MemUnmap(ptr, size), CUDA_SUCCESS);
    EXPECT_EQ(cu.MemAddressFree(ptr, size), CUDA_SUCCESS);
    EXPECT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  }

  // Memory this process created and released while its own import (another
  // open file description, as another process's would be) still holds it.
  void ReleaseWhileImported(size_t size, CUmemGenericAllocationHandle* imported) {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr ptr = 0;
    ASSERT_NO_FATAL_FAILURE(CreateMapped(size, &handle, &ptr));
    int fd = -1;
    ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_SUCCESS);
    ASSERT_EQ(cu.MemImportFromShareableHandle(imported, reinterpret_cast<void*>(uintptr_t(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    close(fd);  // An importer keeps the import, not the descriptor.
    UnmapAndRelease(size, handle, ptr);  // The exporter lets go of all of it.
  }

  // A fresh, initialised fake that reads CUDA_VISIBLE_DEVICES=`visible`
  // (unset for nullptr); the other variables stay as they are.
  void ReloadWithVisible(const char* visible) {
    Unload();
    if (visible == nullptr) {
      unsetenv("CUDA_VISIBLE_DEVICES");
    } else {
      setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    }
    ASSERT_NO_FATAL_FAILURE(Load());
    ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  }

  int Count() {
    int count = -1;
    EXPECT_EQ(cu.DeviceGetCount(&count), CUDA_SUCCESS);
    return count;
  }

  // cuDeviceGetName of this load's device `ordinal` ("" on error).
  std::string Name(int ordinal) {
    char name[64];
    if (cu.DeviceGetName(name, sizeof(name), ordinal) != CUDA_SUCCESS) return "";
    return name;
  }

  // cuDeviceGetUuid_v2 of this load's device `ordinal`, as a string ("" on error).
  std::string Uuid(int ordinal) {
    CUuuid uuid;
    if (cu.DeviceGetUuid(&uuid, ordinal) != CUDA_SUCCESS) return "";
    return UuidString(uuid);
  }

  // The names of the devices a load with CUDA_VISIBLE_DEVICES=`visible`
  // sees, by ordinal.
  std::vector<std::string> VisibleNames(const char* visible) {
    std::vector<std::string> names;
    ReloadWithVisible(visible);
    if (HasFatalFailure()) return names;
    const int count = Count();
    for (int ordinal = 0; ordinal < count; ++ordinal) names.push_back(Name(ordinal));
    return names;
  }

  Api cu;
  CUcontext context_ = nullptr;

 private:
  void* library_ = nullptr;
};

// ---- Loading, errors, initialisation ----

TEST_F(FakeCudaTest, ExportsOnlyVersionedNames) {
  void* library = dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(library, nullptr);
  // cuda.h's macros map these names away: a driver exports the _v2 symbols.
  EXPECT_EQ(dlsym(library, "cuMemAlloc"), nullptr);
  EXPECT_EQ(dlsym(library, "cuDeviceTotalMem"), nullptr);
  EXPECT_EQ(dlsym(library, "cuIpcOpenMemHandle"), nullptr);
  EXPECT_EQ(dlsym(library, "cuGetProcAddress_v2"), nullptr);  // Not modelled.
  dlclose(library);
}

TEST_F(FakeCudaTest, ErrorNamesAndDescriptionsWorkBeforeInit) {
  const char* text = nullptr;
  ASSERT_EQ(cu.GetErrorName(CUDA_SUCCESS, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_SUCCESS");
  ASSERT_EQ(cu.GetErrorString(CUDA_SUCCESS, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "no error");
  ASSERT_EQ(cu.GetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "out of memory");

  // Every code the fake returns has a name and a description.
  const std::pair<CUresult, const char*> returned[] = {
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
      {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
      {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  for (const auto& [code, name] : returned) {
    const char* got = nullptr;
    ASSERT_EQ(cu.GetErrorName(code, &got), CUDA_SUCCESS) << name;
    EXPECT_STREQ(got, name);
    got = nullptr;
    ASSERT_EQ(cu.GetErrorString(code, &got), CUDA_SUCCESS) << name;
    ASSERT_NE(got, nullptr);
    EXPECT_GT(std::strlen(got), 0u) << name;
  }

  // As the real driver: an unknown code is INVALID_VALUE and a null string.
  const CUresult unknown = static_cast<CUresult>(555);
  text = "unchanged";
  EXPECT_EQ(cu.GetErrorName(unknown, &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
  text = "unchanged";
  EXPECT_EQ(cu.GetErrorString(unknown, &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(cu.GetErrorName(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, DriverVersionIsCuda13WithoutInit) {
  int version = 0;
  ASSERT_EQ(cu.DriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
  EXPECT_EQ(cu.DriverGetVersion(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, EverythingElseBeforeInitReturnsNotInitialized) {
  int count = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  char buffer[16] = {};
  EXPECT_EQ(cu.DeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.DeviceGet(&device, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.DevicePrimaryCtxRetain(&context, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.CtxGetCurrent(&context), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemGetAllocationGranularity(&bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemAddressReserve(&ptr, kGranularity, 0, 0, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemAlloc(&ptr, 64), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemHostRegister(buffer, sizeof(buffer), 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cu.MemcpyHtoD(0, buffer, sizeof(buffer)), CUDA_ERROR_NOT_INITIALIZED);
}

TEST_F(FakeCudaTest, InitRejectsFlagsThenSucceeds) {
  EXPECT_EQ(cu.Init(1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.Init(0), CUDA_SUCCESS);
  EXPECT_EQ(cu.Init(0), CUDA_SUCCESS);
  int count = -1;
  ASSERT_EQ(cu.DeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 1);  // The default.
}

TEST_F(FakeCudaTest, InjectedInitErrorIsReturnedAndSticks) {
  setenv("MEMD_FAKE_CUDA_INIT_ERROR", "100", 1);  // CUDA_ERROR_NO_DEVICE
  EXPECT_EQ(cu.Init(0), CUDA_ERROR_NO_DEVICE);
  unsetenv("MEMD_FAKE_CUDA_INIT_ERROR");  // Read once: still failed.
  EXPECT_EQ(cu.Init(0), CUDA_ERROR_NO_DEVICE);
  int count = 0;
  EXPECT_EQ(cu.DeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
}

TEST_F(FakeCudaTest, MalformedEnvironmentFailsInit) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "two", 1);
  EXPECT_EQ(cu.Init(0), CUDA_ERROR_INVALID_VALUE);
  Unload();
  ClearEnvironment();
  setenv("MEMD_FAKE_CUDA_MEMORY", "1G", 1);  // Plain integers only.
  ASSERT_NO_FATAL_FAILURE(Load());
  EXPECT_EQ(cu.Init(0), CUDA_ERROR_INVALID_VALUE);
  Unload();
  ClearEnvironment();
  setenv("MEMD_FAKE_CUDA_INIT_ERROR", "12345", 1);  // Not a CUresult.
  ASSERT_NO_FATAL_FAILURE(Load());
  EXPECT_EQ(cu.Init(0), CUDA_ERROR_INVALID_VALUE);
}

// ---- Devices ----

TEST_F(FakeCudaTest, DevicesFollowTheEnvironment) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "3", 1);
  setenv("MEMD_FAKE_CUDA_MEMORY", "67108864", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  int count = 0;
  ASSERT_EQ(cu.DeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 3);

  std::vector<std::string> uuids;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = -1;
    ASSERT_EQ(cu.DeviceGet(&device, ordinal), CUDA_SUCCESS);
    EXPECT_EQ(device, ordinal);
    char name[64];
    ASSERT_EQ(cu.DeviceGetName(name, sizeof(name), device), CUDA_SUCCESS);
    EXPECT_EQ(std::string(name), "memd fake GPU " + std::to_string(ordinal));
    size_t total = 0;
    ASSERT_EQ(cu.DeviceTotalMem(&total, device), CUDA_SUCCESS);
    EXPECT_EQ(total, 64 * kMiB);
    CUuuid uuid;
    ASSERT_EQ(cu.DeviceGetUuid(&uuid, device), CUDA_SUCCESS);
    uuids.emplace_back(uuid.bytes, sizeof(uuid.bytes));
    int bus = -1;
    ASSERT_EQ(cu.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device),
              CUDA_SUCCESS);
    EXPECT_EQ(bus, ordinal);
    int pci_device = -1;
    ASSERT_EQ(cu.DeviceGetAttribute(&pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device),
              CUDA_SUCCESS);
    EXPECT_EQ(pci_device, 0);
  }
  EXPECT_NE(uuids[0], uuids[1]);
  EXPECT_NE(uuids[1], uuids[2]);
  EXPECT_EQ(uuids[0].substr(0, 13), "memd-fake-gpu");

  // The same ordinal has the same UUID in another load (another process).
  Unload();
  ASSERT_NO_FATAL_FAILURE(Load());
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUuuid again;
  ASSERT_EQ(cu.DeviceGetUuid(&again, 1), CUDA_SUCCESS);
  EXPECT_EQ(std::string(again.bytes, sizeof(again.bytes)), uuids[1]);

  // A short buffer gets a truncated, terminated name.
  char short_name[5];
  ASSERT_EQ(cu.DeviceGetName(short_name, sizeof(short_name), 0), CUDA_SUCCESS);
  EXPECT_STREQ(short_name, "memd");
}

TEST_F(FakeCudaTest, BadOrdinalsAreInvalidDevice) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUdevice device = 0;
  char name[32];
  CUuuid uuid;
  size_t total = 0;
  int value = 0;
  CUcontext context = nullptr;
  for (int bad : {2, -1, 1000}) {
    EXPECT_EQ(cu.DeviceGet(&device, bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DeviceGetName(name, sizeof(name), bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DeviceGetUuid(&uuid, bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DeviceTotalMem(&total, bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, bad),
              CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DevicePrimaryCtxRetain(&context, bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(cu.DevicePrimaryCtxRelease(bad), CUDA_ERROR_INVALID_DEVICE);
  }
  EXPECT_EQ(cu.DeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.DeviceGetName(nullptr, 10, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.DeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, ZeroDevicesIsAllowed) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "0", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  int count = -1;
  ASSERT_EQ(cu.DeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 0);
  CUdevice device = 0;
  EXPECT_EQ(cu.DeviceGet(&device, 0), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCudaTest, AttributesReportVmmByDefault) {
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  int value = -1;
  ASSERT_EQ(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  0),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(cu.DeviceGetAttribute(
                &value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  ASSERT_EQ(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1);
  // Attributes the fake does not model are INVALID_VALUE, not a made-up number.
  EXPECT_EQ(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.DeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, VmmOffDisablesVmmAndFdExport) {
  setenv("MEMD_FAKE_CUDA_VMM", "0", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  int value = -1;
  ASSERT_EQ(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  0),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 0);
  ASSERT_EQ(cu.DeviceGetAttribute(
                &value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 0);
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  const CUmemAllocationProp no_export = DeviceProp(0, CU_MEM_HANDLE_TYPE_NONE);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &no_export, 0), CUDA_ERROR_NOT_SUPPORTED);
  // Legacy allocations still work.
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
}

// ---- Contexts ----

TEST_F(FakeCudaTest, PrimaryContextIsOnePerDeviceAndRefcounted) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUcontext first = nullptr;
  CUcontext second = nullptr;
  CUcontext other = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&first, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&second, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&other, 1), CUDA_SUCCESS);
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other);
  EXPECT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  EXPECT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.DevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  EXPECT_EQ(cu.DevicePrimaryCtxRetain(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
}

// What tests read to see whether anyone holds a device's primary context.
TEST_F(FakeCudaTest, PrimaryContextStateIsActiveWhileRetained) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  unsigned int flags = 7;
  int active = 7;
  EXPECT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, &active), CUDA_ERROR_NOT_INITIALIZED);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(active, 0);
  CUcontext context = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  ASSERT_EQ(cu.DevicePrimaryCtxGetState(1, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0) << "one context per device";
  ASSERT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1) << "retained twice, released once";
  ASSERT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 0);
  EXPECT_EQ(cu.DevicePrimaryCtxGetState(2, &flags, &active), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu.DevicePrimaryCtxGetState(-1, &flags, &active), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu.DevicePrimaryCtxGetState(0, nullptr, &active), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.DevicePrimaryCtxGetState(0, &flags, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, CurrentContextIsPerThread) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUdevice device = -1;
  EXPECT_EQ(cu.CtxGetDevice(&device), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext context = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context, 1), CUDA_SUCCESS);
  ASSERT_EQ(cu.CtxSetCurrent(context), CUDA_SUCCESS);
  CUcontext current = nullptr;
  ASSERT_EQ(cu.CtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, context);
  ASSERT_EQ(cu.CtxGetDevice(&device), CUDA_SUCCESS);
  EXPECT_EQ(device, 1);

  std::thread other([&] {
    CUcontext seen = context;
    EXPECT_EQ(cu.CtxGetCurrent(&seen), CUDA_SUCCESS);
    EXPECT_EQ(seen, nullptr);
    CUdevice other_device = -1;
    EXPECT_EQ(cu.CtxGetDevice(&other_device), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr ptr = 0;
    EXPECT_EQ(cu.MemAlloc(&ptr, 64), CUDA_ERROR_INVALID_CONTEXT);
  });
  other.join();

  int not_a_context = 0;
  EXPECT_EQ(cu.CtxSetCurrent(reinterpret_cast<CUcontext>(&not_a_context)),
            CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.CtxGetCurrent(nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.CtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.CtxGetDevice(&device), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(FakeCudaTest, CallsThatNeedAContextFailWithoutOne) {
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUipcMemHandle ipc{};
  char buffer[64] = {};
  EXPECT_EQ(cu.MemAlloc(&ptr, 64), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemFree(0x1000), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.IpcGetMemHandle(&ipc, 0x1000), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.IpcOpenMemHandle(&ptr, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.IpcCloseMemHandle(0x1000), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemHostRegister(buffer, sizeof(buffer), 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemHostUnregister(buffer), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemHostGetDevicePointer(&ptr, buffer, 0), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemcpyHtoD(0x1000, buffer, 8), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemcpyDtoH(buffer, 0x1000, 8), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cu.MemsetD8(0x1000, 0, 8), CUDA_ERROR_INVALID_CONTEXT);

  // The VMM calls take their device from their arguments.
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr va = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(kGranularity, &handle, &va));
  UnmapAndRelease(kGranularity, handle, va);
}

TEST_F(FakeCudaTest, LastReleaseOfThePrimaryContextFreesItsMemory) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 8 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cu.DevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  // Still current, but no longer active.
  CUdeviceptr other = 0;
  EXPECT_EQ(cu.MemAlloc(&other, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CUcontext again = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
  EXPECT_EQ(again, context_);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_ERROR_INVALID_VALUE);  // Gone with the reset.
  ASSERT_EQ(cu.MemAlloc(&other, 8 * kMiB), CUDA_SUCCESS);  // And its bytes are back.
  EXPECT_EQ(cu.MemFree(other), CUDA_SUCCESS);
}

// ---- Virtual memory management ----

TEST_F(FakeCudaTest, VmmCreateReserveMapSetAccessWriteRead) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  size_t granularity = 0;
  ASSERT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(granularity, kGranularity);
  ASSERT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
            CUDA_SUCCESS);
  EXPECT_EQ(granularity, kGranularity);

  const size_t size = 2 * kGranularity;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAddressReserve(&ptr, size, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(ptr % kGranularity, 0u);
  ASSERT_EQ(cu.MemMap(ptr, size, 0, handle, 0), CUDA_SUCCESS);

  // Mapped but not yet accessible.
  const std::vector<unsigned char> data = Pattern(size, 7);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, data.data(), size), CUDA_ERROR_INVALID_VALUE);

  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), size), CUDA_SUCCESS);
  std::vector<unsigned char> back(size);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(back, data);
  // A CUdeviceptr is a host address of this process.
  EXPECT_EQ(std::memcmp(AsPointer(ptr), data.data(), size), 0);
  ASSERT_EQ(cu.MemsetD8(ptr + 100, 0xab, 10), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(AsPointer(ptr))[105], 0xab);

  // Read-only: reads work, writes are refused.
  const CUmemAccessDesc ro = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READ);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &ro, 1), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyDtoH(back.data(), ptr, 16), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, data.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemsetD8(ptr, 0, 16), CUDA_ERROR_INVALID_VALUE);

  UnmapAndRelease(size, handle, ptr);
}

TEST_F(FakeCudaTest, VmmRejectsBadArguments) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());  // For the copies at the end.
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(nullptr, kGranularity, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop = DeviceProp(2);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
  prop = DeviceProp(0, CU_MEM_HANDLE_TYPE_FABRIC);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  prop = DeviceProp(0);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  size_t granularity = 0;
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(cu.MemRelease(0x1234), CUDA_ERROR_INVALID_VALUE);
  prop = DeviceProp(0);
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_SUCCESS);

  // Reservations.
  CUdeviceptr va = 0;
  EXPECT_EQ(cu.MemAddressReserve(&va, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, kGranularity, 3 * 4096, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, kGranularity, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemAddressReserve(&va, 4 * kGranularity, 4 * kGranularity, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va % (4 * kGranularity), 0u);

  // Mappings.
  EXPECT_EQ(cu.MemMap(va, kGranularity, kGranularity, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va, 2 * kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va + 4096, kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va + 4 * kGranularity, kGranularity, 0, handle, 0),
            CUDA_ERROR_INVALID_VALUE);  // Outside the reservation.
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, 0x1234, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, handle, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemMap(va, kGranularity, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Taken.
  ASSERT_EQ(cu.MemMap(va + kGranularity, kGranularity, 0, handle, 0), CUDA_SUCCESS);

  // Access.
  CUmemAccessDesc desc = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(cu.MemSetAccess(va, 3 * kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va + 4096, kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 0), CUDA_ERROR_INVALID_VALUE);
  desc = Access(5, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 1), CUDA_ERROR_INVALID_DEVICE);
  desc = Access(0, static_cast<CUmemAccess_flags>(2));
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  // Two adjacent mappings at once; a copy may span both.
  const CUmemAccessDesc both[] = {Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                                  Access(1, CU_MEM_ACCESS_FLAGS_PROT_READ)};
  ASSERT_EQ(cu.MemSetAccess(va, 2 * kGranularity, both, 2), CUDA_SUCCESS);
  // Both mappings show the same memory (one handle mapped twice). Through the
  // driver: the compiler may reorder plain accesses to two addresses it
  // knows to differ.
  const char x = 'x';
  ASSERT_EQ(cu.MemcpyHtoD(va + 10, &x, 1), CUDA_SUCCESS);
  char seen = 0;
  ASSERT_EQ(cu.MemcpyDtoH(&seen, va + kGranularity + 10, 1), CUDA_SUCCESS);
  EXPECT_EQ(seen, 'x');

  // Unmapping and freeing.
  EXPECT_EQ(cu.MemUnmap(va, kGranularity / 2), CUDA_ERROR_INVALID_VALUE);  // Part of one.
  EXPECT_EQ(cu.MemUnmap(va + 2 * kGranularity, kGranularity), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_ERROR_INVALID_VALUE);  // Mapped.
  EXPECT_EQ(cu.MemAddressFree(va, kGranularity), CUDA_ERROR_INVALID_VALUE);     // Wrong size.
  ASSERT_EQ(cu.MemUnmap(va, 2 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemUnmap(va, kGranularity), CUDA_ERROR_INVALID_VALUE);  // Already unmapped.
  ASSERT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, VmmMemoryLivesWhileMappedAfterRelease) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(4 * kMiB, &handle, &ptr));
  ASSERT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemMap(ptr, 4 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Handle gone.

  ASSERT_EQ(cu.MemsetD8(ptr, 0x5a, 4 * kMiB), CUDA_SUCCESS);  // Memory is not.
  unsigned char byte = 0;
  ASSERT_EQ(cu.MemcpyDtoH(&byte, ptr + 4 * kMiB - 1, 1), CUDA_SUCCESS);
  EXPECT_EQ(byte, 0x5a);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(total_bytes, 8 * kMiB);
  EXPECT_EQ(free_bytes, 4 * kMiB);

  ASSERT_EQ(cu.MemUnmap(ptr, 4 * kMiB), CUDA_SUCCESS);  // The last mapping frees it.
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 8 * kMiB);
  EXPECT_EQ(cu.MemAddressFree(ptr, 4 * kMiB), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, ExportedFdImportsAsTheSameMemory) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(kGranularity, &handle, &ptr));
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  ASSERT_GE(fd, 0);
  int second_fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&second_fd, handle,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  EXPECT_NE(fd, second_fd);  // A new descriptor each time; the caller owns it.
  close(second_fd);

  // Importing in the same process gives a new handle over the same memory.
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, reinterpret_cast<void*>(uintptr_t(fd)),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  EXPECT_NE(imported, handle);
  EXPECT_GE(fcntl(fd, F_GETFD), 0);  // Still the caller's.
  CUdeviceptr other = 0;
  ASSERT_EQ(cu.MemAddressReserve(&other, kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(other, kGranularity, 0, imported, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(other, kGranularity, &rw, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> data = Pattern(kGranularity, 3);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), data.size()), CUDA_SUCCESS);
  std::vector<unsigned char> back(kGranularity);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), other, back.size()), CUDA_SUCCESS);
  EXPECT_EQ(back, data);

  UnmapAndRelease(kGranularity, imported, other);
  UnmapAndRelease(kGranularity, handle, ptr);
  close(fd);
}

// As the real driver: memory one process released stays allocated, and
// counted used, while another process's import holds it ("freed" memory the
// driver still counts). A process of another import is modelled by the
// import's own open file description, so the same process shows it too.
TEST_F(FakeCudaTest, ReleasedMemoryAnImportHoldsStaysUsedUntilTheImportGoes) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_NO_FATAL_FAILURE(ReleaseWhileImported(4 * kMiB, &imported));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 4 * kMiB) << "the import still holds the released 4 MiB";
  CUmemGenericAllocationHandle other = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&other, 6 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);

  ASSERT_EQ(cu.MemRelease(imported), CUDA_SUCCESS);  // The last import goes.
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 8 * kMiB);
  ASSERT_EQ(cu.MemCreate(&other, 6 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(other), CUDA_SUCCESS);
}

// cuMemAlloc, too, finds the memory free once the last import let go of it,
// without a cuMemGetInfo or cuMemCreate in between to notice.
TEST_F(FakeCudaTest, LegacyAllocationsReuseMemoryTheLastImportLetGoOf) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_NO_FATAL_FAILURE(ReleaseWhileImported(4 * kMiB, &imported));
  CUdeviceptr legacy = 0;
  EXPECT_EQ(cu.MemAlloc(&legacy, 6 * kMiB), CUDA_ERROR_OUT_OF_MEMORY)
      << "the import still holds the released 4 MiB";
  ASSERT_EQ(cu.MemRelease(imported), CUDA_SUCCESS);  // The last import goes.
  ASSERT_EQ(cu.MemAlloc(&legacy, 6 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(legacy), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, ExportImportErrors) {
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const CUmemAllocationProp not_exportable = DeviceProp(0, CU_MEM_HANDLE_TYPE_NONE);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &not_exportable, 0), CUDA_SUCCESS);
  int fd = -1;
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);

  const CUmemAllocationProp exportable = DeviceProp(0);
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &exportable, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu.MemExportToShareableHandle(nullptr, handle,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, 0x1234, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);  // Released.

  CUmemGenericAllocationHandle imported = 0;
  auto as_handle = [](int descriptor) { return reinterpret_cast<void*>(uintptr_t(descriptor)); };
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(987654),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_INVALID_VALUE);  // Not an open descriptor.
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(devnull),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_UNKNOWN);  // Not VMM memory (the real driver's answer to a memfd).
  close(devnull);
  const int memfd = memfd_create("not-from-the-fake", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, kGranularity), 0);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(memfd),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(memfd),
                                            CU_MEM_HANDLE_TYPE_FABRIC),
            CUDA_ERROR_NOT_SUPPORTED);
  close(memfd);
}

TEST_F(FakeCudaTest, ExportedFdSharesMemoryWithAnotherProcess) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  const size_t size = 2 * kGranularity;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(size, &handle, &ptr));
  const std::vector<unsigned char> from_parent = Pattern(size, 1);
  const std::vector<unsigned char> from_child = Pattern(size, 2);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);

  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUmemGenericAllocationHandle imported = 0;
    ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, reinterpret_cast<void*>(uintptr_t(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    CUdeviceptr mine = 0;
    ASSERT_EQ(cu.MemAddressReserve(&mine, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemMap(mine, size, 0, imported, 0), CUDA_SUCCESS);
    const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ASSERT_EQ(cu.MemSetAccess(mine, size, &rw, 1), CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    UnmapAndRelease(size, imported, mine);
  });

  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(seen, from_child);
  close(fd);
  UnmapAndRelease(size, handle, ptr);
}

// ---- CUDA_VISIBLE_DEVICES ----

using Names = std::vector<std::string>;

TEST_F(FakeCudaTest, VisibleDevicesRenumberButKeepThePhysicalIdentity) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("MEMD_FAKE_CUDA_MEMORY", "4194304", 1);  // 4 MiB each
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);
  const std::string uuid1 = Uuid(1);
  ASSERT_NE(uuid0, uuid1);

  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible("1,0"));
  ASSERT_EQ(Count(), 2);
  CUdevice device = -1;
  ASSERT_EQ(cu.DeviceGet(&device, 0), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);  // CUdevice is this process's ordinal...
  // ...of physical device 1: its name, UUID and bus id go with it.
  EXPECT_EQ(Name(0), "memd fake GPU 1");
  EXPECT_EQ(Uuid(0), uuid1);
  EXPECT_EQ(Name(1), "memd fake GPU 0");
  EXPECT_EQ(Uuid(1), uuid0);
  int bus = -1;
  ASSERT_EQ(cu.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), CUDA_SUCCESS);
  EXPECT_EQ(bus, 1);
  ASSERT_EQ(cu.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), CUDA_SUCCESS);
  EXPECT_EQ(bus, 0);
  EXPECT_EQ(cu.DeviceGet(&device, 2), CUDA_ERROR_INVALID_DEVICE);

  // Contexts and VMM locations take ordinals; the memory is physical 1's.
  ASSERT_NO_FATAL_FAILURE(InitWithContext(0));
  ASSERT_EQ(cu.CtxGetDevice(&device), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);
  const CUmemAllocationProp on0 = DeviceProp(0);
  const CUmemAllocationProp on1 = DeviceProp(1);
  const CUmemAllocationProp on2 = DeviceProp(2);
  size_t granularity = 0;
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &on1, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &on2, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  EXPECT_EQ(cu.MemCreate(&first, kGranularity, &on2, 0), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cu.MemCreate(&first, 4 * kMiB, &on0, 0), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, first, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  EXPECT_EQ(FdTarget(fd), "/memfd:memd-fake-cuda-vmm:1 (deleted)");
  close(fd);
  // Counted against ordinal 0 (physical 1), not against ordinal 1.
  size_t free_bytes = 1;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 0u);
  EXPECT_EQ(cu.MemCreate(&second, kGranularity, &on0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&second, 4 * kMiB, &on1, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);

  // Unset again: every device, under its physical index.
  EXPECT_EQ(VisibleNames(nullptr), (Names{"memd fake GPU 0", "memd fake GPU 1"}));
}

TEST_F(FakeCudaTest, VisibleDevicesTakeUuidsAndUniqueUuidPrefixes) {
  // The fake's UUIDs differ only in their last bytes (the physical index), so
  // with devices 0 and 1 no shorter prefix of 1's is unique; device 16 of 17
  // is the only one whose UUID starts like "...00001".
  setenv("MEMD_FAKE_CUDA_DEVICES", "17", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);
  const std::string uuid1 = Uuid(1);
  const std::string uuid16 = Uuid(16);
  ASSERT_EQ(uuid1, "GPU-6d656d64-2d66-616b-652d-677075000001");  // "memd-fake-gpu", 1.

  EXPECT_EQ(VisibleNames(uuid1.c_str()), Names{"memd fake GPU 1"});
  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible(uuid1.c_str()));
  EXPECT_EQ(Uuid(0), uuid1);
  std::string upper = uuid1;  // Hex digits in either case.
  for (size_t i = 4; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_EQ(VisibleNames(upper.c_str()), Names{"memd fake GPU 1"});

  const std::string prefix16 = uuid16.substr(0, uuid16.size() - 1);
  EXPECT_EQ(VisibleNames(prefix16.c_str()), Names{"memd fake GPU 16"});
  // Mixed with indices, in the listed order.
  const std::string mixed = prefix16 + ",0," + uuid1;
  EXPECT_EQ(VisibleNames(mixed.c_str()),
            (Names{"memd fake GPU 16", "memd fake GPU 0", "memd fake GPU 1"}));

  // A prefix of several UUIDs, or of none, names no device.
  const std::string prefix1 = uuid1.substr(0, uuid1.size() - 1);
  EXPECT_EQ(VisibleNames(prefix1.c_str()), Names{});
  EXPECT_EQ(VisibleNames("GPU-ffffffff"), Names{});
  EXPECT_EQ(VisibleNames("GPU-"), Names{});
  EXPECT_EQ(VisibleNames(uuid1.substr(4).c_str()), Names{});  // Without "GPU-".

  // With one device, the short form the CUDA guide shows ("GPU-8932f937").
  Unload();
  setenv("MEMD_FAKE_CUDA_DEVICES", "1", 1);
  const std::string short_form = uuid0.substr(0, 12);
  EXPECT_EQ(VisibleNames(short_form.c_str()), Names{"memd fake GPU 0"});
}

TEST_F(FakeCudaTest, VisibleDevicesStopAtTheFirstInvalidOrRepeatedEntry) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);

  EXPECT_EQ(VisibleNames("0,7,1"), Names{"memd fake GPU 0"});  // Out of range.
  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible("0,7,1"));
  ASSERT_EQ(Count(), 1);
  CUdevice device = -1;
  EXPECT_EQ(cu.DeviceGet(&device, 1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu.DevicePrimaryCtxRetain(&context_, 1), CUDA_ERROR_INVALID_DEVICE);

  EXPECT_EQ(VisibleNames("1,x,0"), Names{"memd fake GPU 1"});  // Not a number.
  EXPECT_EQ(VisibleNames("1,,0"), Names{"memd fake GPU 1"});   // An empty entry.
  EXPECT_EQ(VisibleNames("1,"), Names{"memd fake GPU 1"});
  EXPECT_EQ(VisibleNames("1,-1,0"), Names{"memd fake GPU 1"});
  EXPECT_EQ(VisibleNames("-1"), Names{});  // The usual way to hide every GPU.
  EXPECT_EQ(VisibleNames("2"), Names{});
  // A device named twice (by index or by UUID) ends the list there too.
  EXPECT_EQ(VisibleNames("1,1,0"), Names{"memd fake GPU 1"});
  const std::string twice = "0," + uuid0 + ",1";
  EXPECT_EQ(VisibleNames(twice.c_str()), Names{"memd fake GPU 0"});
  // A bad list is never an error: cuInit succeeded in each load above.
  EXPECT_EQ(VisibleNames("0,1"), (Names{"memd fake GPU 0", "memd fake GPU 1"}));
}

TEST_F(FakeCudaTest, EmptyVisibleDevicesShowsNoDevice) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  // Set but empty is not unset, unlike the MEMD_FAKE_CUDA_* variables.
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  EXPECT_EQ(Count(), 0);
  CUdevice device = -1;
  EXPECT_EQ(cu.DeviceGet(&device, 0), CUDA_ERROR_INVALID_DEVICE);
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_DEVICE);

  // Read at cuInit, once per load: changing it later changes nothing.
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  EXPECT_EQ(Count(), 0);
}

TEST_F(FakeCudaTest, ExportedFdImportsOnlyWhereItsPhysicalDeviceIsVisible) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());  // Sees both devices.
  const size_t size = kGranularity;
  const CUmemAllocationProp on1 = DeviceProp(1);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, size, &on1, 0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAddressReserve(&ptr, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(ptr, size, 0, handle, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw1 = Access(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &rw1, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> from_parent = Pattern(size, 11);
  const std::vector<unsigned char> from_child = Pattern(size, 12);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  ASSERT_EQ(FdTarget(fd), "/memfd:memd-fake-cuda-vmm:1 (deleted)");

  // A process that sees physical device 1 alone, as its ordinal 0.
  RunInChild([&] {
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    ASSERT_NO_FATAL_FAILURE(InitWithContext(0));
    ASSERT_EQ(Count(), 1);
    CUmemGenericAllocationHandle imported = 0;
    ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    CUdeviceptr mine = 0;
    ASSERT_EQ(cu.MemAddressReserve(&mine, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemMap(mine, size, 0, imported, 0), CUDA_SUCCESS);
    const CUmemAccessDesc by_physical = Access(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    EXPECT_EQ(cu.MemSetAccess(mine, size, &by_physical, 1), CUDA_ERROR_INVALID_DEVICE);
    const CUmemAccessDesc rw0 = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ASSERT_EQ(cu.MemSetAccess(mine, size, &rw0, 1), CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    // As on the real driver (H200, 580), an imported allocation is not
    // exported again: the importer hands on the descriptor it was given.
    int again = -1;
    EXPECT_EQ(cu.MemExportToShareableHandle(&again, imported,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(again, -1);
    UnmapAndRelease(size, imported, mine);
  });

  // Processes that do not see physical device 1 cannot import its memory.
  for (const char* visible : {"0", ""}) {
    RunInChild([&] {
      setenv("CUDA_VISIBLE_DEVICES", visible, 1);
      ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
      CUmemGenericAllocationHandle imported = 0;
      EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                CUDA_ERROR_INVALID_DEVICE)
          << "CUDA_VISIBLE_DEVICES=\"" << visible << "\"";
    });
  }
  // Nor one whose machine has no device 1 (MEMD_FAKE_CUDA_DEVICES=1).
  RunInChild([&] {
    setenv("MEMD_FAKE_CUDA_DEVICES", "1", 1);
    ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle imported = 0;
    EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_NOT_SUPPORTED);
  });

  // The bytes the first child wrote are in the parent's mapping.
  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(seen, from_child);
  close(fd);
  UnmapAndRelease(size, handle, ptr);
}

// ---- Memory limits ----

TEST_F(FakeCudaTest, AllocationsBeyondTheConfiguredMemoryAreOutOfMemory) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);  // 8 MiB
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  CUmemGenericAllocationHandle big = 0;
  EXPECT_EQ(cu.MemCreate(&big, 10 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&big, 6 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle more = 0;
  EXPECT_EQ(cu.MemCreate(&more, 4 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 2 * kMiB), CUDA_SUCCESS);  // Exactly full.
  size_t free_bytes = 1;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 0u);
  EXPECT_EQ(total_bytes, 8 * kMiB);
  CUdeviceptr one_byte = 0;
  EXPECT_EQ(cu.MemAlloc(&one_byte, 1), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemRelease(big), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemAlloc(&one_byte, 1), CUDA_SUCCESS);  // Freed bytes come back.
  EXPECT_EQ(cu.MemFree(one_byte), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, MemoryIsCountedPerDevice) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("MEMD_FAKE_CUDA_MEMORY", "4194304", 1);  // 4 MiB each
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  const CUmemAllocationProp on0 = DeviceProp(0);
  const CUmemAllocationProp on1 = DeviceProp(1);
  ASSERT_EQ(cu.MemCreate(&first, 4 * kMiB, &on0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemCreate(&second, 2 * kMiB, &on0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&second, 4 * kMiB, &on1, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);
}

// ---- Legacy allocations and IPC ----

TEST_F(FakeCudaTest, LegacyAllocAndFreeErrors) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  EXPECT_EQ(cu.MemAlloc(&ptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAlloc(nullptr, 64), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemAlloc(&ptr, 1000), CUDA_SUCCESS);
  EXPECT_EQ(ptr % 256, 0u);
  const std::vector<unsigned char> data = Pattern(1000, 9);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), data.size()), CUDA_SUCCESS);
  std::vector<unsigned char> back(1000);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), ptr, back.size()), CUDA_SUCCESS);
  EXPECT_EQ(back, data);
  EXPECT_EQ(cu.MemFree(ptr + 8), CUDA_ERROR_INVALID_VALUE);  // Not the base.
  EXPECT_EQ(cu.MemFree(0xdead0000), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_ERROR_INVALID_VALUE);  // Twice.
}

TEST_F(FakeCudaTest, IpcHandleOpensInAnotherProcessAndNotInTheExporter) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 3 * 4096;
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, size), CUDA_SUCCESS);
  const std::vector<unsigned char> from_parent = Pattern(size, 4);
  const std::vector<unsigned char> from_child = Pattern(size, 5);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  CUipcMemHandle handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&handle, ptr), CUDA_SUCCESS);
  CUipcMemHandle again;
  ASSERT_EQ(cu.IpcGetMemHandle(&again, ptr), CUDA_SUCCESS);  // Cheap and repeatable.
  EXPECT_EQ(std::memcmp(&handle, &again, sizeof(handle)), 0);

  CUdeviceptr opened = 0;
  EXPECT_EQ(cu.IpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);  // CUDA refuses the exporter's own handle.

  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Flags.
    ASSERT_EQ(cu.IpcOpenMemHandle(&mine, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    // Opening again counts and returns the same pointer; each open needs a close.
    CUdeviceptr twice = 0;
    ASSERT_EQ(cu.IpcOpenMemHandle(&twice, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    EXPECT_EQ(twice, mine);
    // Imported memory is not the importer's to free or to re-export.
    EXPECT_EQ(cu.MemFree(mine), CUDA_ERROR_INVALID_VALUE);
    CUipcMemHandle reexport;
    EXPECT_EQ(cu.IpcGetMemHandle(&reexport, mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
    EXPECT_EQ(cu.MemsetD8(mine, 0, 1), CUDA_SUCCESS);  // Still open once.
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(cu.MemsetD8(mine, 0, 1), CUDA_ERROR_INVALID_VALUE);  // Unmapped.
  });

  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  std::vector<unsigned char> expected = from_child;
  expected[0] = 0;  // The child's memset.
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, IpcHandleErrors) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 8192), CUDA_SUCCESS);
  CUipcMemHandle handle;
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, ptr + 4096), CUDA_ERROR_INVALID_VALUE);  // Not a base.
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, 0xdead0000), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.IpcGetMemHandle(nullptr, ptr), CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle vmm = 0;
  CUdeviceptr va = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(kGranularity, &vmm, &va));
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, va), CUDA_ERROR_INVALID_VALUE);  // VMM memory.
  UnmapAndRelease(kGranularity, vmm, va);

  CUipcMemHandle garbage;
  std::memset(&garbage, 0x42, sizeof(garbage));
  CUdeviceptr opened = 0;
  EXPECT_EQ(cu.IpcOpenMemHandle(&opened, garbage, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu.IpcCloseMemHandle(ptr), CUDA_ERROR_INVALID_VALUE);  // Not IPC-opened.

  // A handle to memory the exporter has freed no longer opens.
  ASSERT_EQ(cu.IpcGetMemHandle(&handle, ptr), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_HANDLE);
  });
}

TEST_F(FakeCudaTest, NewMemoryWhereFreedMemoryWasGetsANewHandle) {
  // cuda.h: if memory is freed with cuMemFree and a later cuMemAlloc returns
  // memory at the same address, cuIpcGetMemHandle returns a unique handle
  // for the new memory. The old handle must not reach the new memory (memd
  // relies on it when it frees a legacy IPC segment).
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 4 * 4096;
  CUdeviceptr old_ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&old_ptr, size), CUDA_SUCCESS);
  CUipcMemHandle old_handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&old_handle, old_ptr), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemFree(old_ptr), CUDA_SUCCESS);
  CUdeviceptr new_ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&new_ptr, size), CUDA_SUCCESS);
  const std::vector<unsigned char> secret = Pattern(size, 9);
  ASSERT_EQ(cu.MemcpyHtoD(new_ptr, secret.data(), size), CUDA_SUCCESS);
  CUipcMemHandle new_handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&new_handle, new_ptr), CUDA_SUCCESS);
  EXPECT_NE(std::memcmp(&old_handle, &new_handle, sizeof(old_handle)), 0);
  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, old_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_HANDLE);
    ASSERT_EQ(cu.IpcOpenMemHandle(&mine, new_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, secret);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
  });
  EXPECT_EQ(cu.MemFree(new_ptr), CUDA_SUCCESS);
}

// ---- Host registration ----

TEST_F(FakeCudaTest, HostRegistration) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 4 * 4096;
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  char* bytes = static_cast<char*>(memory);

  EXPECT_EQ(cu.MemHostRegister(bytes, size, 0x100), CUDA_ERROR_INVALID_VALUE);  // Unknown flag.
  EXPECT_EQ(cu.MemHostRegister(bytes, size, CU_MEMHOSTREGISTER_READ_ONLY),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu.MemHostRegister(bytes, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemHostRegister(nullptr, size, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemHostRegister(bytes, 2 * 4096,
                               CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.MemHostRegister(bytes + 4096, 2 * 4096, 0),
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  ASSERT_EQ(cu.MemHostRegister(bytes + 2 * 4096, 4096, 0), CUDA_SUCCESS);  // Adjacent is fine.

  CUdeviceptr device_ptr = 0;
  ASSERT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes + 100, 0), CUDA_SUCCESS);
  EXPECT_EQ(AsPointer(device_ptr), bytes + 100);  // Unified addressing.
  EXPECT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes + 3 * 4096, 0),
            CUDA_ERROR_INVALID_VALUE);  // Not registered.
  EXPECT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes, 1), CUDA_ERROR_INVALID_VALUE);

  // Registered memory is a valid copy target; a copy may span registrations.
  const std::vector<unsigned char> data = Pattern(3 * 4096, 6);
  ASSERT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(bytes), data.data(), data.size()),
            CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(bytes, data.data(), data.size()), 0);
  EXPECT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(bytes), data.data(), size),
            CUDA_ERROR_INVALID_VALUE);  // The last page is not registered.

  EXPECT_EQ(cu.MemHostUnregister(bytes + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes + 3 * 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemHostUnregister(bytes), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes + 2 * 4096), CUDA_SUCCESS);

  // Memory that is not mapped cannot be registered.
  ASSERT_EQ(munmap(memory, size), 0);
  EXPECT_EQ(cu.MemHostRegister(bytes, size, 0), CUDA_ERROR_INVALID_VALUE);
}

// ---- Copies ----

TEST_F(FakeCudaTest, CopiesOutsideDeviceMemoryAreInvalidValue) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 4096), CUDA_SUCCESS);
  std::vector<unsigned char> buffer(8192, 1);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 4096), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 4097), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr + 4000, buffer.data(), 200), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(buffer.data(), ptr + 1, 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemsetD8(ptr, 0, 8192), CUDA_ERROR_INVALID_VALUE);
  // Host memory that was never registered is not device memory.
  EXPECT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(buffer.data()), buffer.data(), 16),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(buffer.data(), 0, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(nullptr, ptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 0), CUDA_SUCCESS);  // Nothing to copy.
  EXPECT_EQ(cu.MemcpyHtoD(~CUdeviceptr{0} - 8, buffer.data(), 16), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 16), CUDA_ERROR_INVALID_VALUE);  // Freed.
}

TEST_F(FakeCudaTest, CopiesMaySpanAdjacentVmmMappings) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  ASSERT_EQ(cu.MemCreate(&first, kGranularity, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemCreate(&second, kGranularity, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cu.MemAddressReserve(&va, 3 * kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(va, kGranularity, 0, first, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(va + kGranularity, kGranularity, 0, second, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(va, 2 * kGranularity, &rw, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> data = Pattern(8192, 8);
  EXPECT_EQ(cu.MemcpyHtoD(va + kGranularity - 4096, data.data(), data.size()), CUDA_SUCCESS);
  // Past the second mapping is reserved but unmapped address space.
  EXPECT_EQ(cu.MemcpyHtoD(va + 2 * kGranularity - 4096, data.data(), data.size()),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemUnmap(va, 2 * kGranularity), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemAddressFree(va, 3 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);
}

// ---- Threads ----

TEST_F(FakeCudaTest, ThreadsAllocateConcurrently) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "67108864", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUcontext context = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      EXPECT_EQ(cu.CtxSetCurrent(context), CUDA_SUCCESS);
      for (int i = 0; i < 50; ++i) {
        CUdeviceptr ptr = 0;
        ASSERT_EQ(cu.MemAlloc(&ptr, 4096), CUDA_SUCCESS);
        ASSERT_EQ(cu.MemsetD8(ptr, static_cast<unsigned char>(t), 4096), CUDA_SUCCESS);
        unsigned char byte = 0xff;
        ASSERT_EQ(cu.MemcpyDtoH(&byte, ptr + 4095, 1), CUDA_SUCCESS);
        EXPECT_EQ(byte, t);
        ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(cu.CtxSetCurrent(context), CUDA_SUCCESS);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, total_bytes);
}

}  // namespace
