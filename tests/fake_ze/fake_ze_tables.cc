// memd FAKE Level Zero driver (a test double): the DDI table getters, the
// only Level Zero symbols it exports (fake_ze.map). The loader refuses a
// driver that lacks any non-"Exp" getter (zetGetTracerExpProcAddrTable
// included), so every one is here; the tables the fake does not implement
// come back empty, and calls through their null entries fail in the loader.
//
// Versions as Intel's compute-runtime handles them: only the major must
// match; an entry is filled when the requested version is at least the one
// that introduced it, so a newer loader asking for 1.17 gets the same tables.

#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include "tests/fake_ze/fake_ze_api.h"

namespace memd::fake_ze {
namespace {

// Checks the request and empties the table.
template <typename Table>
ze_result_t Begin(ze_api_version_t version, Table* table) {
  if (table == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ZE_MAJOR_VERSION(version) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT)) {
    return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
  }
  *table = Table{};
  return ZE_RESULT_SUCCESS;
}

// Fills `entry` if the caller's version has it.
template <typename Function>
void Set(ze_api_version_t version, ze_api_version_t since, Function* entry, Function function) {
  if (version >= since) *entry = function;
}

constexpr ze_api_version_t k10 = ZE_API_VERSION_1_0;

}  // namespace
}  // namespace memd::fake_ze

using memd::fake_ze::Begin;
using memd::fake_ze::k10;
using memd::fake_ze::Set;
namespace fz = memd::fake_ze;

#define MEMD_FAKE_ZE_EXPORT extern "C" __attribute__((visibility("default")))

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetGlobalProcAddrTable(ze_api_version_t v,
                                                         ze_global_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnInit, &fz::Init);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetDriverProcAddrTable(ze_api_version_t v,
                                                         ze_driver_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnGet, &fz::DriverGet);
  Set(v, k10, &t->pfnGetApiVersion, &fz::DriverGetApiVersion);
  Set(v, k10, &t->pfnGetProperties, &fz::DriverGetProperties);
  Set(v, k10, &t->pfnGetIpcProperties, &fz::DriverGetIpcProperties);
  Set(v, k10, &t->pfnGetExtensionProperties, &fz::DriverGetExtensionProperties);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetDeviceProcAddrTable(ze_api_version_t v,
                                                         ze_device_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnGet, &fz::DeviceGet);
  Set(v, k10, &t->pfnGetSubDevices, &fz::DeviceGetSubDevices);
  Set(v, k10, &t->pfnGetProperties, &fz::DeviceGetProperties);
  Set(v, k10, &t->pfnGetCommandQueueGroupProperties, &fz::DeviceGetCommandQueueGroupProperties);
  Set(v, k10, &t->pfnGetMemoryProperties, &fz::DeviceGetMemoryProperties);
  Set(v, k10, &t->pfnGetStatus, &fz::DeviceGetStatus);
  Set(v, ZE_API_VERSION_1_3, &t->pfnPciGetPropertiesExt, &fz::DevicePciGetPropertiesExt);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetContextProcAddrTable(ze_api_version_t v,
                                                          ze_context_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::ContextCreate);
  Set(v, k10, &t->pfnDestroy, &fz::ContextDestroy);
  Set(v, k10, &t->pfnGetStatus, &fz::ContextGetStatus);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetCommandQueueProcAddrTable(ze_api_version_t v,
                                                               ze_command_queue_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::CommandQueueCreate);
  Set(v, k10, &t->pfnDestroy, &fz::CommandQueueDestroy);
  Set(v, k10, &t->pfnExecuteCommandLists, &fz::CommandQueueExecuteCommandLists);
  Set(v, k10, &t->pfnSynchronize, &fz::CommandQueueSynchronize);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetCommandListProcAddrTable(ze_api_version_t v,
                                                              ze_command_list_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::CommandListCreate);
  Set(v, k10, &t->pfnCreateImmediate, &fz::CommandListCreateImmediate);
  Set(v, k10, &t->pfnDestroy, &fz::CommandListDestroy);
  Set(v, k10, &t->pfnClose, &fz::CommandListClose);
  Set(v, k10, &t->pfnReset, &fz::CommandListReset);
  Set(v, k10, &t->pfnAppendBarrier, &fz::CommandListAppendBarrier);
  Set(v, k10, &t->pfnAppendMemoryCopy, &fz::CommandListAppendMemoryCopy);
  Set(v, k10, &t->pfnAppendMemoryFill, &fz::CommandListAppendMemoryFill);
  Set(v, k10, &t->pfnAppendSignalEvent, &fz::CommandListAppendSignalEvent);
  Set(v, k10, &t->pfnAppendWaitOnEvents, &fz::CommandListAppendWaitOnEvents);
  Set(v, k10, &t->pfnAppendEventReset, &fz::CommandListAppendEventReset);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetEventProcAddrTable(ze_api_version_t v,
                                                        ze_event_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::EventCreate);
  Set(v, k10, &t->pfnDestroy, &fz::EventDestroy);
  Set(v, k10, &t->pfnHostSignal, &fz::EventHostSignal);
  Set(v, k10, &t->pfnHostSynchronize, &fz::EventHostSynchronize);
  Set(v, k10, &t->pfnQueryStatus, &fz::EventQueryStatus);
  Set(v, k10, &t->pfnHostReset, &fz::EventHostReset);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetEventPoolProcAddrTable(ze_api_version_t v,
                                                            ze_event_pool_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::EventPoolCreate);
  Set(v, k10, &t->pfnDestroy, &fz::EventPoolDestroy);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetFenceProcAddrTable(ze_api_version_t v,
                                                        ze_fence_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnCreate, &fz::FenceCreate);
  Set(v, k10, &t->pfnDestroy, &fz::FenceDestroy);
  Set(v, k10, &t->pfnHostSynchronize, &fz::FenceHostSynchronize);
  Set(v, k10, &t->pfnQueryStatus, &fz::FenceQueryStatus);
  Set(v, k10, &t->pfnReset, &fz::FenceReset);
  return ZE_RESULT_SUCCESS;
}

MEMD_FAKE_ZE_EXPORT ze_result_t zeGetMemProcAddrTable(ze_api_version_t v, ze_mem_dditable_t* t) {
  if (ze_result_t result = Begin(v, t)) return result;
  Set(v, k10, &t->pfnAllocShared, &fz::MemAllocShared);
  Set(v, k10, &t->pfnAllocDevice, &fz::MemAllocDevice);
  Set(v, k10, &t->pfnAllocHost, &fz::MemAllocHost);
  Set(v, k10, &t->pfnFree, &fz::MemFree);
  Set(v, k10, &t->pfnGetAllocProperties, &fz::MemGetAllocProperties);
  Set(v, k10, &t->pfnGetAddressRange, &fz::MemGetAddressRange);
  Set(v, k10, &t->pfnGetIpcHandle, &fz::MemGetIpcHandle);
  Set(v, k10, &t->pfnOpenIpcHandle, &fz::MemOpenIpcHandle);
  Set(v, k10, &t->pfnCloseIpcHandle, &fz::MemCloseIpcHandle);
  return ZE_RESULT_SUCCESS;
}

// The tables the fake leaves empty: accepted, every entry null.
#define MEMD_FAKE_ZE_EMPTY_TABLE(getter, table_type)                           \
  MEMD_FAKE_ZE_EXPORT ze_result_t getter(ze_api_version_t v, table_type* t) { \
    return Begin(v, t);                                                        \
  }

MEMD_FAKE_ZE_EMPTY_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetModuleProcAddrTable, ze_module_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)

MEMD_FAKE_ZE_EMPTY_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)

MEMD_FAKE_ZE_EMPTY_TABLE(zesGetDeviceProcAddrTable, zes_device_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
MEMD_FAKE_ZE_EMPTY_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
