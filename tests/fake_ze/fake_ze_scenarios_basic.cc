// Scenarios: discovery through the real loader, device queries, memory,
// configuration and fault injection. Each runs in its own process, started by
// fake_ze_test.cc with the environment it names.

#include <sys/mman.h>

#include <cstring>
#include <string>

#include "tests/fake_ze/fake_ze_scenario.h"

namespace memd::fake_ze_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// MEMD_FAKE_ZE_DEVICES devices, one driver, API 1.4, the driver's identity.
TEST_F(Scenario, Discovery) {
  Start();
  EXPECT_EQ(devices.size(), EnvNumber("MEMD_FAKE_ZE_DEVICES", 1));
  ze_api_version_t version{};
  EXPECT_EQ(ze.zeDriverGetApiVersion(driver, &version), ZE_RESULT_SUCCESS);
  EXPECT_EQ(version, ZE_API_VERSION_1_4);
  auto properties = Desc<ze_driver_properties_t>(ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES);
  EXPECT_EQ(ze.zeDriverGetProperties(driver, &properties), ZE_RESULT_SUCCESS);
  EXPECT_EQ(std::memcmp(properties.uuid.id, "memd-fake-ze-drv", 16), 0);
  EXPECT_EQ(properties.driverVersion, 1u);
  auto ipc = Desc<ze_driver_ipc_properties_t>(ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES);
  EXPECT_EQ(ze.zeDriverGetIpcProperties(driver, &ipc), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ipc.flags, ZE_IPC_PROPERTY_FLAG_MEMORY);
  uint32_t extensions = 5;
  EXPECT_EQ(ze.zeDriverGetExtensionProperties(driver, &extensions, nullptr), ZE_RESULT_SUCCESS);
  EXPECT_EQ(extensions, 0u);
  // Asking for fewer than there are fills that many.
  if (devices.size() > 1) {
    uint32_t one = 1;
    ze_device_handle_t first = nullptr;
    EXPECT_EQ(ze.zeDeviceGet(driver, &one, &first), ZE_RESULT_SUCCESS);
    EXPECT_EQ(one, 1u);
    EXPECT_EQ(first, devices[0]);
  }
  EXPECT_EQ(ze.zeContextGetStatus(context), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Properties per device, keeping the caller's stype and pNext.
TEST_F(Scenario, DeviceProperties) {
  Start();
  ASSERT_EQ(devices.size(), 2u) << "run with MEMD_FAKE_ZE_DEVICES=2";
  int marker = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto p = Desc<ze_device_properties_t>(ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, &marker);
    ASSERT_EQ(ze.zeDeviceGetProperties(devices[i], &p), ZE_RESULT_SUCCESS);
    EXPECT_EQ(p.stype, ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES);
    EXPECT_EQ(p.pNext, &marker);
    EXPECT_EQ(p.type, ZE_DEVICE_TYPE_GPU);
    EXPECT_EQ(p.vendorId, 0x8086u);
    EXPECT_EQ(p.flags, 0u);
    EXPECT_EQ(p.maxMemAllocSize, 64 * kMiB);
    EXPECT_EQ(std::string(p.name), "memd fake Level Zero GPU " + std::to_string(i));
    unsigned char uuid[16] = {'m', 'e', 'm', 'd', '-', 'f', 'a', 'k', 'e', '-', 'z', 'e', 0, 0, 0,
                              static_cast<unsigned char>(i)};
    EXPECT_EQ(std::memcmp(p.uuid.id, uuid, 16), 0);

    auto pci = Desc<ze_pci_ext_properties_t>(ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES, &marker);
    ASSERT_EQ(ze.zeDevicePciGetPropertiesExt(devices[i], &pci), ZE_RESULT_SUCCESS);
    EXPECT_EQ(pci.pNext, &marker);
    EXPECT_EQ(pci.address.domain, 0u);
    EXPECT_EQ(pci.address.bus, 0x10u + i);
    EXPECT_EQ(pci.address.device, 0u);
    EXPECT_EQ(pci.address.function, 0u);

    uint32_t count = 0;
    ASSERT_EQ(ze.zeDeviceGetMemoryProperties(devices[i], &count, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(count, 1u);
    auto memory = Desc<ze_device_memory_properties_t>(ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES, &marker);
    ASSERT_EQ(ze.zeDeviceGetMemoryProperties(devices[i], &count, &memory), ZE_RESULT_SUCCESS);
    EXPECT_EQ(memory.pNext, &marker);
    EXPECT_EQ(memory.totalSize, 64 * kMiB);
    EXPECT_STREQ(memory.name, "HBM");

    uint32_t subdevices = 3;
    EXPECT_EQ(ze.zeDeviceGetSubDevices(devices[i], &subdevices, nullptr), ZE_RESULT_SUCCESS);
    EXPECT_EQ(subdevices, 0u);
  }
  DestroyContextAndExpectNoLeaks();
}

TEST_F(Scenario, QueueGroups) {
  Start();
  uint32_t count = 0;
  ASSERT_EQ(ze.zeDeviceGetCommandQueueGroupProperties(devices[0], &count, nullptr),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(count, 2u);
  ze_command_queue_group_properties_t groups[2] = {
      Desc<ze_command_queue_group_properties_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES),
      Desc<ze_command_queue_group_properties_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES)};
  count = 1;  // Only the first.
  ASSERT_EQ(ze.zeDeviceGetCommandQueueGroupProperties(devices[0], &count, groups),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(groups[1].numQueues, 0u);
  count = 2;
  ASSERT_EQ(ze.zeDeviceGetCommandQueueGroupProperties(devices[0], &count, groups),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(groups[0].flags,
            ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
  EXPECT_EQ(groups[0].numQueues, 1u);
  EXPECT_EQ(groups[0].maxMemoryFillPatternSize, 16u);
  EXPECT_EQ(groups[1].flags, ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
  EXPECT_EQ(groups[1].numQueues, 2u);
  EXPECT_EQ(groups[1].maxMemoryFillPatternSize, 4u);
  DestroyContextAndExpectNoLeaks();
}

// Run with MEMD_FAKE_ZE_MEMORY=4 MiB.
TEST_F(Scenario, DeviceMemoryLimitsAndFree) {
  Start();
  auto desc = Desc<ze_device_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
  void* big = nullptr;
  void* more = nullptr;
  ASSERT_EQ(ze.zeMemAllocDevice(context, &desc, 3 * kMiB, 0, devices[0], &big), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 2 * kMiB, 0, devices[0], &more),
            ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(Counters().device_bytes[0], 3 * kMiB);
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 0, 0, devices[0], &more),
            ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 3, devices[0], &more),
            ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
  // A live allocation keeps the context.
  EXPECT_EQ(ze.zeContextDestroy(context), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
  // Only the base frees.
  EXPECT_EQ(ze.zeMemFree(context, static_cast<char*>(big) + 4096), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(ze.zeMemFree(context, big), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, big), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  // Freed bytes are available again; alignment is honoured.
  ASSERT_EQ(ze.zeMemAllocDevice(context, &desc, 4 * kMiB, 2 * kMiB, devices[0], &big),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % (2 * kMiB), 0u);
  auto props = Desc<ze_memory_allocation_properties_t>(ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES);
  ze_device_handle_t owner = nullptr;
  ASSERT_EQ(ze.zeMemGetAllocProperties(context, static_cast<char*>(big) + 100, &props, &owner),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(props.type, ZE_MEMORY_TYPE_DEVICE);
  EXPECT_NE(props.id, 0u);
  EXPECT_EQ(owner, devices[0]);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(ze.zeMemGetAddressRange(context, static_cast<char*>(big) + 100, &base, &size),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(base, big);
  EXPECT_EQ(size, 4 * kMiB);
  int local = 0;
  ASSERT_EQ(ze.zeMemGetAllocProperties(context, &local, &props, nullptr), ZE_RESULT_SUCCESS);
  EXPECT_EQ(props.type, ZE_MEMORY_TYPE_UNKNOWN);
  EXPECT_EQ(ze.zeMemFree(context, big), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Dies of SIGSEGV, which fake_ze_test expects: the device pointer is not
// host memory.
TEST_F(Scenario, DereferenceDevicePointer) {
  Start();
  volatile unsigned char* device = static_cast<unsigned char*>(NewDeviceMemory(4096));
  ASSERT_NE(device, nullptr);
  std::fprintf(stderr, "about to read the device pointer\n");
  unsigned char value = device[0];
  std::fprintf(stderr, "read %d: the device pointer was host-readable\n", value);
}

TEST_F(Scenario, HostMemory) {
  Start();
  auto desc = Desc<ze_host_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC);
  void* host = nullptr;
  ASSERT_EQ(ze.zeMemAllocHost(context, &desc, 10000, 0, &host), ZE_RESULT_SUCCESS);
  std::memset(host, 0x5c, 10000);  // Host-accessible.
  auto props = Desc<ze_memory_allocation_properties_t>(ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES);
  ASSERT_EQ(ze.zeMemGetAllocProperties(context, host, &props, nullptr), ZE_RESULT_SUCCESS);
  EXPECT_EQ(props.type, ZE_MEMORY_TYPE_HOST);
  EXPECT_EQ(Counters().host_allocations, 1u);
  // Host memory goes through the fake's copies like device memory.
  void* device = NewDeviceMemory(10000);
  CopyAndWait(device, host, 10000);
  std::vector<unsigned char> back = Download(device, 10000);
  EXPECT_EQ(back, std::vector<unsigned char>(10000, 0x5c));
  auto device_desc = Desc<ze_device_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
  void* shared = nullptr;
  EXPECT_EQ(ze.zeMemAllocShared(context, &device_desc, &desc, 4096, 0, devices[0], &shared),
            ZE_RESULT_ERROR_UNSUPPORTED_FEATURE);
  EXPECT_EQ(ze.zeMemFree(context, host), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// A second context cannot free or copy the first one's device memory.
TEST_F(Scenario, ContextsAreSeparate) {
  Start();
  auto desc = Desc<ze_context_desc_t>(ZE_STRUCTURE_TYPE_CONTEXT_DESC);
  ze_context_handle_t other = nullptr;
  ASSERT_EQ(ze.zeContextCreate(driver, &desc, &other), ZE_RESULT_SUCCESS);
  void* device = NewDeviceMemory(4096);
  EXPECT_EQ(ze.zeMemFree(other, device), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  auto queue_desc = Desc<ze_command_queue_desc_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC);
  ze_command_list_handle_t list = nullptr;
  ASSERT_EQ(ze.zeCommandListCreateImmediate(other, devices[0], &queue_desc, &list),
            ZE_RESULT_SUCCESS);
  std::vector<unsigned char> bytes(4096);
  EXPECT_EQ(ze.zeCommandListAppendMemoryCopy(list, bytes.data(), device, 4096, nullptr, 0, nullptr),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  // A range running past the end of an allocation.
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeContextDestroy(other), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// zeInit returns FAKE_ZE_EXPECT_INIT (a malformed variable, or
// MEMD_FAKE_ZE_INIT_ERROR), and again on the next call. Nothing else may be
// called then: loader 1.8.12 unloads a driver whose zeInit failed but keeps
// its table, so zeDriverGet would jump into the unmapped library (SIGSEGV).
TEST_F(Scenario, InitFails) {
  auto expected = static_cast<ze_result_t>(EnvNumber("FAKE_ZE_EXPECT_INIT", 0));
  EXPECT_EQ(ze.zeInit(0), expected);
  EXPECT_EQ(ze.zeInit(0), expected);
}

// Run with MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@2=0x70000002;zeMemGetIpcHandle@1=0x78000004.
TEST_F(Scenario, Faults) {
  Start();
  auto desc = Desc<ze_device_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
  void* first = nullptr;
  void* second = nullptr;
  void* third = nullptr;
  ASSERT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 0, devices[0], &first), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 0, devices[0], &second),
            ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
  EXPECT_EQ(second, nullptr);  // Nothing else happened.
  ASSERT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 0, devices[0], &third), ZE_RESULT_SUCCESS);
  ze_ipc_mem_handle_t handle{};
  EXPECT_EQ(ze.zeMemGetIpcHandle(context, first, &handle), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Counters().ipc_get_calls, 0u);
  EXPECT_EQ(ze.zeMemGetIpcHandle(context, first, &handle), ZE_RESULT_SUCCESS);
  EXPECT_EQ(Counters().device_allocations, 2u);
  EXPECT_EQ(ze.zeMemFree(context, first), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, third), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Argument checks. Null handles only in pass-through mode: in intercept mode
// the loader itself dereferences them before the driver could say anything.
TEST_F(Scenario, ArgumentErrors) {
  Start();
  auto desc = Desc<ze_device_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
  void* ptr = nullptr;
  EXPECT_EQ(ze.zeMemAllocDevice(context, nullptr, 4096, 0, devices[0], &ptr),
            ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 0, devices[0], nullptr),
            ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  desc.flags = 0x8;
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, 4096, 0, devices[0], &ptr),
            ZE_RESULT_ERROR_INVALID_ENUMERATION);
  ze_context_desc_t context_desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 2};
  ze_context_handle_t other = nullptr;
  EXPECT_EQ(ze.zeContextCreate(driver, &context_desc, &other), ZE_RESULT_ERROR_INVALID_ENUMERATION);
  auto queue_desc = Desc<ze_command_queue_desc_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC);
  queue_desc.mode = static_cast<ze_command_queue_mode_t>(3);
  ze_command_list_handle_t list = nullptr;
  EXPECT_EQ(ze.zeCommandListCreateImmediate(context, devices[0], &queue_desc, &list),
            ZE_RESULT_ERROR_INVALID_ENUMERATION);
  queue_desc.mode = ZE_COMMAND_QUEUE_MODE_DEFAULT;
  queue_desc.ordinal = 2;
  EXPECT_EQ(ze.zeCommandListCreateImmediate(context, devices[0], &queue_desc, &list),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  queue_desc.ordinal = 0;
  queue_desc.index = 1;  // Group 0 has one queue.
  EXPECT_EQ(ze.zeCommandListCreateImmediate(context, devices[0], &queue_desc, &list),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  ze_event_pool_desc_t pool_desc{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, 0, 0};
  ze_event_pool_handle_t pool = nullptr;
  EXPECT_EQ(ze.zeEventPoolCreate(context, &pool_desc, 0, nullptr, &pool),
            ZE_RESULT_ERROR_INVALID_SIZE);
  if (!InterceptMode()) {
    EXPECT_EQ(ze.zeMemAllocDevice(nullptr, &desc, 4096, 0, devices[0], &ptr),
              ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    EXPECT_EQ(ze.zeContextDestroy(nullptr), ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    EXPECT_EQ(ze.zeEventHostSynchronize(nullptr, 0), ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
    EXPECT_EQ(ze.zeCommandListAppendMemoryCopy(nullptr, &ptr, &ptr, 1, nullptr, 0, nullptr),
              ZE_RESULT_ERROR_INVALID_NULL_HANDLE);
  }
  DestroyContextAndExpectNoLeaks();
}

}  // namespace
}  // namespace memd::fake_ze_test
