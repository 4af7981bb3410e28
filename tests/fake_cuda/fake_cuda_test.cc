// The FAKE CUDA driver (libmemd_fake_cuda.so), loaded as memd loads a CUDA
// driver: loading, errors, initialisation, devices and contexts. Memory
// (VMM, visible devices, limits): fake_cuda_memory_test.cc; legacy
// allocations, IPC, host registration, copies and threads:
// fake_cuda_ipc_test.cc. The fixture: fake_cuda_fixture.h.

#include "tests/fake_cuda/fake_cuda_fixture.h"

namespace memd_fake_cuda_test {
namespace {

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

}  // namespace
}  // namespace memd_fake_cuda_test
