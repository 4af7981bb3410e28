#pragma once

// memd FAKE Level Zero driver (a test double): the Level Zero functions it
// implements, one list that drives everything that must agree on it: the
// declarations below (typed by ze_ddi.h's own function-pointer types, so a
// definition that strays from the API fails to link), the call counters the
// fault plan counts with, and the names MEMD_FAKE_ZE_FAULTS may use.
// fake_ze_tables.cc puts each into its DDI table entry.

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

// X(Name): the API function "ze" #Name, whose pointer type is ze_pfn<Name>_t.
#define MEMD_FAKE_ZE_FUNCTIONS(X)          \
  X(Init)                                  \
  X(DriverGet)                             \
  X(DriverGetApiVersion)                   \
  X(DriverGetProperties)                   \
  X(DriverGetIpcProperties)                \
  X(DriverGetExtensionProperties)          \
  X(DeviceGet)                             \
  X(DeviceGetSubDevices)                   \
  X(DeviceGetProperties)                   \
  X(DeviceGetCommandQueueGroupProperties)  \
  X(DeviceGetMemoryProperties)             \
  X(DeviceGetStatus)                       \
  X(DevicePciGetPropertiesExt)             \
  X(ContextCreate)                         \
  X(ContextDestroy)                        \
  X(ContextGetStatus)                      \
  X(MemAllocDevice)                        \
  X(MemAllocHost)                          \
  X(MemAllocShared)                        \
  X(MemFree)                               \
  X(MemGetAllocProperties)                 \
  X(MemGetAddressRange)                    \
  X(MemGetIpcHandle)                       \
  X(MemOpenIpcHandle)                      \
  X(MemCloseIpcHandle)                     \
  X(EventPoolCreate)                       \
  X(EventPoolDestroy)                      \
  X(EventCreate)                           \
  X(EventDestroy)                          \
  X(EventHostSignal)                       \
  X(EventHostSynchronize)                  \
  X(EventQueryStatus)                      \
  X(EventHostReset)                        \
  X(FenceCreate)                           \
  X(FenceDestroy)                          \
  X(FenceHostSynchronize)                  \
  X(FenceQueryStatus)                      \
  X(FenceReset)                            \
  X(CommandQueueCreate)                    \
  X(CommandQueueDestroy)                   \
  X(CommandQueueExecuteCommandLists)       \
  X(CommandQueueSynchronize)               \
  X(CommandListCreate)                     \
  X(CommandListCreateImmediate)            \
  X(CommandListDestroy)                    \
  X(CommandListClose)                      \
  X(CommandListReset)                      \
  X(CommandListAppendBarrier)              \
  X(CommandListAppendMemoryCopy)           \
  X(CommandListAppendMemoryFill)           \
  X(CommandListAppendSignalEvent)          \
  X(CommandListAppendWaitOnEvents)         \
  X(CommandListAppendEventReset)

namespace memd::fake_ze {

// kMemAllocDevice names zeMemAllocDevice; kApiCount is how many there are.
enum class Api : int {
#define MEMD_FAKE_ZE_ENUM(name) k##name,
  MEMD_FAKE_ZE_FUNCTIONS(MEMD_FAKE_ZE_ENUM)
#undef MEMD_FAKE_ZE_ENUM
};
#define MEMD_FAKE_ZE_COUNT(name) +1
constexpr int kApiCount = 0 MEMD_FAKE_ZE_FUNCTIONS(MEMD_FAKE_ZE_COUNT);
#undef MEMD_FAKE_ZE_COUNT

// "zeMemAllocDevice" for Api::kMemAllocDevice.
const char* ApiName(Api api);

// The function `name` ("zeMemAllocDevice") names; false if the fake does not
// implement it.
bool FindApi(std::string_view name, Api* api);

// The implementations, with exactly the types of their DDI table entries.
#define MEMD_FAKE_ZE_DECLARE(name) std::remove_pointer_t<ze_pfn##name##_t> name;
MEMD_FAKE_ZE_FUNCTIONS(MEMD_FAKE_ZE_DECLARE)
#undef MEMD_FAKE_ZE_DECLARE

}  // namespace memd::fake_ze
