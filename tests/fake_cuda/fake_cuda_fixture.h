#pragma once

// Tests for the memd FAKE CUDA driver (libmemd_fake_cuda.so), loaded the way
// memd loads a CUDA driver: dlopen(RTLD_NOW | RTLD_LOCAL) and dlsym by the
// versioned symbol names cuda.h maps the API to. Nothing is mocked: memory is
// real memfd memory, shared with real forked children.
//
// Every test gets a fresh fake: SetUp dlopens the library, TearDown dlcloses it
// and checks that it really went away (the fake keeps its state per load, and
// reads its environment at the first cuInit of a load). Children forked by a
// test reload the library too, so each process has its own fake devices.
//
// The fixture of fake_cuda_test.cc and the files beside it (one program):
// the fake loaded fresh for every test, its entry points by their versioned
// symbols, and helpers.

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

namespace memd_fake_cuda_test {

inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kGranularity = 2 * kMiB;

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

inline constexpr const char* kEnvironment[] = {"MEMD_FAKE_CUDA_DEVICES", "MEMD_FAKE_CUDA_MEMORY",
                                        "MEMD_FAKE_CUDA_VMM", "MEMD_FAKE_CUDA_INIT_ERROR",
                                        "CUDA_VISIBLE_DEVICES"};

inline CUmemAllocationProp DeviceProp(
    int device, CUmemAllocationHandleType types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = types;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

inline CUmemAccessDesc Access(int device, CUmemAccess_flags flags) {
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = flags;
  return desc;
}

inline std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>((i * 31 + seed) & 0xff);
  return bytes;
}

inline void* AsPointer(CUdeviceptr address) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address));
}

inline void* AsOsHandle(int fd) { return reinterpret_cast<void*>(static_cast<uintptr_t>(fd)); }

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID and
// CUDA_VISIBLE_DEVICES takes it.
inline std::string UuidString(const CUuuid& uuid) {
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
inline std::string FdTarget(int fd) {
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

}  // namespace memd_fake_cuda_test
