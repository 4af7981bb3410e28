// memd FAKE Level Zero driver (a test double): zeInit, the driver, its
// devices and contexts. Every answer is fixed by the configuration; README.md
// lists the values.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {
namespace {

constexpr uint32_t kDriverVersion = 1;
constexpr char kDriverUuid[ZE_MAX_DRIVER_UUID_SIZE + 1] = "memd-fake-ze-drv";
constexpr char kDeviceUuidPrefix[] = "memd-fake-ze";  // + the index, 4 bytes big-endian.
constexpr uint32_t kVendorId = 0x8086;
constexpr uint32_t kDeviceId = 0xfa4e;  // Not a real Intel device id.
constexpr uint32_t kPciBusBase = 0x10;  // Device n is on bus 0x10 + n.

// Fills a caller's properties struct while keeping its stype and pNext, which
// say which version of the struct it is and what extends it.
template <typename T>
void FillKeepingHeader(T* out, T value) {
  value.stype = out->stype;
  value.pNext = out->pNext;
  *out = value;
}

// The count-query protocol of zeDriverGet, zeDeviceGet and the properties
// arrays: *count 0 (or no array) asks how many; else fill up to *count and
// say how many were filled.
template <typename Fill>
void Enumerate(uint32_t* count, bool have_array, uint32_t available, Fill fill) {
  if (*count == 0 || !have_array) {
    *count = available;
    return;
  }
  uint32_t filled = std::min(*count, available);
  for (uint32_t i = 0; i < filled; ++i) fill(i);
  *count = filled;
}

ze_result_t Configure(State& state) {
  std::string error;
  if (!ReadConfig([](const char* name) -> const char* { return std::getenv(name); },
                  &state.config, &error)) {
    std::fprintf(stderr, "memd fake Level Zero driver: %s\n", error.c_str());
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  if (state.config.init_error != ZE_RESULT_SUCCESS) return state.config.init_error;
  for (int i = 0; i < kMaxDevices; ++i) state.devices[static_cast<size_t>(i)].index = i;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t Init(ze_init_flags_t flags) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (flags > (ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY)) {
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  }
  // A GPU driver has nothing to offer a caller asking for VPUs only.
  if (flags == ZE_INIT_FLAG_VPU_ONLY) return ZE_RESULT_ERROR_UNINITIALIZED;
  // The result of the first call sticks: the loader calls this twice, and a
  // driver that failed to initialise stays failed for the process.
  if (!state.init_tried) {
    state.init_tried = true;
    state.init_result = Configure(state);
  }
  return state.init_result;
}

ze_result_t DriverGet(uint32_t* pCount, ze_driver_handle_t* phDrivers) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kDriverGet)) return result;
  if (pCount == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  Enumerate(pCount, phDrivers != nullptr, 1, [&](uint32_t) { phDrivers[0] = &state.driver; });
  return ZE_RESULT_SUCCESS;
}

namespace {

// The checks every driver query starts with.
ze_result_t EnterDriver(State& state, Api api, ze_driver_handle_t driver, const void* out) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (driver == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!state.IsDriver(driver)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t DriverGetApiVersion(ze_driver_handle_t hDriver, ze_api_version_t* version) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterDriver(state, Api::kDriverGetApiVersion, hDriver, version)) {
    return result;
  }
  *version = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetProperties(ze_driver_handle_t hDriver,
                                ze_driver_properties_t* pDriverProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDriver(state, Api::kDriverGetProperties, hDriver, pDriverProperties)) {
    return result;
  }
  ze_driver_properties_t properties{};
  std::memcpy(properties.uuid.id, kDriverUuid, ZE_MAX_DRIVER_UUID_SIZE);
  properties.driverVersion = kDriverVersion;
  FillKeepingHeader(pDriverProperties, properties);
  return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetIpcProperties(ze_driver_handle_t hDriver,
                                   ze_driver_ipc_properties_t* pIpcProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDriver(state, Api::kDriverGetIpcProperties, hDriver, pIpcProperties)) {
    return result;
  }
  ze_driver_ipc_properties_t properties{};
  properties.flags = ZE_IPC_PROPERTY_FLAG_MEMORY;
  FillKeepingHeader(pIpcProperties, properties);
  return ZE_RESULT_SUCCESS;
}

ze_result_t DriverGetExtensionProperties(ze_driver_handle_t hDriver, uint32_t* pCount,
                                         ze_driver_extension_properties_t*) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDriver(state, Api::kDriverGetExtensionProperties, hDriver, pCount)) {
    return result;
  }
  *pCount = 0;  // None: the fake implements no extension functions.
  return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGet(ze_driver_handle_t hDriver, uint32_t* pCount, ze_device_handle_t* phDevices) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterDriver(state, Api::kDeviceGet, hDriver, pCount)) return result;
  Enumerate(pCount, phDevices != nullptr, static_cast<uint32_t>(state.config.devices),
            [&](uint32_t i) { phDevices[i] = &state.devices[i]; });
  return ZE_RESULT_SUCCESS;
}

namespace {

// The checks every device query starts with.
ze_result_t EnterDevice(State& state, Api api, ze_device_handle_t device, const void* out) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (device == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (out == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (state.Device(device) == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t DeviceGetSubDevices(ze_device_handle_t hDevice, uint32_t* pCount,
                                ze_device_handle_t*) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterDevice(state, Api::kDeviceGetSubDevices, hDevice, pCount)) {
    return result;
  }
  *pCount = 0;  // Single-tile devices.
  return ZE_RESULT_SUCCESS;
}

namespace {

ze_device_properties_t DeviceProperties(const State& state, const _ze_device_handle_t& device,
                                        ze_structure_type_t stype) {
  ze_device_properties_t properties{};
  properties.type = ZE_DEVICE_TYPE_GPU;
  properties.vendorId = kVendorId;
  properties.deviceId = kDeviceId;
  properties.flags = 0;  // Discrete: not integrated, not a sub-device, no ECC.
  properties.coreClockRate = 1600;
  properties.maxMemAllocSize = state.config.memory;
  properties.maxHardwareContexts = 65536;
  properties.maxCommandQueuePriority = 0;
  properties.numThreadsPerEU = 8;
  properties.physicalEUSimdWidth = 16;
  properties.numEUsPerSubslice = 8;
  properties.numSubslicesPerSlice = 64;
  properties.numSlices = 1;
  // Version 1.2 of the struct gives the timer in cycles per second, 1.0 in ns.
  properties.timerResolution = stype == ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2 ? 1000000000 : 1;
  properties.timestampValidBits = 64;
  properties.kernelTimestampValidBits = 32;
  std::memcpy(properties.uuid.id, kDeviceUuidPrefix, sizeof(kDeviceUuidPrefix) - 1);
  for (int i = 0; i < 4; ++i) {
    properties.uuid.id[12 + i] = static_cast<uint8_t>(device.index >> (8 * (3 - i)));
  }
  std::snprintf(properties.name, sizeof(properties.name), "memd fake Level Zero GPU %d",
                device.index);
  return properties;
}

}  // namespace

ze_result_t DeviceGetProperties(ze_device_handle_t hDevice,
                                ze_device_properties_t* pDeviceProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDevice(state, Api::kDeviceGetProperties, hDevice, pDeviceProperties)) {
    return result;
  }
  FillKeepingHeader(pDeviceProperties,
                    DeviceProperties(state, *hDevice, pDeviceProperties->stype));
  return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetCommandQueueGroupProperties(
    ze_device_handle_t hDevice, uint32_t* pCount,
    ze_command_queue_group_properties_t* pCommandQueueGroupProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDevice(state, Api::kDeviceGetCommandQueueGroupProperties, hDevice, pCount)) {
    return result;
  }
  Enumerate(pCount, pCommandQueueGroupProperties != nullptr, kQueueGroupCount, [&](uint32_t i) {
    ze_command_queue_group_properties_t properties{};
    properties.flags = kQueueGroups[i].flags;
    properties.maxMemoryFillPatternSize = kQueueGroups[i].max_fill_pattern_size;
    properties.numQueues = kQueueGroups[i].queues;
    FillKeepingHeader(&pCommandQueueGroupProperties[i], properties);
  });
  return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetMemoryProperties(ze_device_handle_t hDevice, uint32_t* pCount,
                                      ze_device_memory_properties_t* pMemProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDevice(state, Api::kDeviceGetMemoryProperties, hDevice, pCount)) {
    return result;
  }
  Enumerate(pCount, pMemProperties != nullptr, 1, [&](uint32_t i) {
    ze_device_memory_properties_t properties{};
    properties.maxClockRate = 3200;
    properties.maxBusWidth = 4096;
    properties.totalSize = state.config.memory;
    std::snprintf(properties.name, sizeof(properties.name), "HBM");
    FillKeepingHeader(&pMemProperties[i], properties);
  });
  return ZE_RESULT_SUCCESS;
}

ze_result_t DeviceGetStatus(ze_device_handle_t hDevice) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kDeviceGetStatus)) return result;
  if (hDevice == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  return state.Device(hDevice) != nullptr ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

ze_result_t DevicePciGetPropertiesExt(ze_device_handle_t hDevice,
                                      ze_pci_ext_properties_t* pPciProperties) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result =
          EnterDevice(state, Api::kDevicePciGetPropertiesExt, hDevice, pPciProperties)) {
    return result;
  }
  ze_pci_ext_properties_t properties{};
  properties.address = {0, kPciBusBase + static_cast<uint32_t>(hDevice->index), 0, 0};
  properties.maxSpeed = {5, 16, int64_t{63} * 1000 * 1000 * 1000};  // PCIe 5 x16, bytes/s.
  FillKeepingHeader(pPciProperties, properties);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ContextCreate(ze_driver_handle_t hDriver, const ze_context_desc_t* desc,
                          ze_context_handle_t* phContext) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterDriver(state, Api::kContextCreate, hDriver, desc)) return result;
  if (phContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->flags > ZE_CONTEXT_FLAG_TBD) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  *phContext = state.contexts.Add(std::make_unique<_ze_context_handle_t>());
  return ZE_RESULT_SUCCESS;
}

ze_result_t ContextDestroy(ze_context_handle_t hContext) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kContextDestroy)) return result;
  if (hContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.contexts.Contains(hContext)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  // Stricter than Intel's driver, which frees what is left: a leak shows.
  if (state.ContextInUse(hContext)) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  state.contexts.Remove(hContext);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ContextGetStatus(ze_context_handle_t hContext) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kContextGetStatus)) return result;
  if (hContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.contexts.Contains(hContext)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

}  // namespace memd::fake_ze
