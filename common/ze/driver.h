#pragma once

// The Level Zero loader, loaded at run time. memd never links
// libze_loader: the same binary runs on nodes without it (no loader, or a
// loader whose zeInit finds no driver, simply means no Level Zero devices),
// and tests put a fake driver under the real loader (ZE_ENABLE_ALT_DRIVERS).

#include <ze_api.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::ze {

// Every entry point memd calls, and only those: X(field, symbol,
// signature). Loader 1.8 (Debian 12) exports all of them.
#define MEMD_ZE_ENTRY_POINTS(X)                                                      \
  X(Init, zeInit, ze_result_t(ze_init_flags_t))                                      \
  X(DriverGet, zeDriverGet, ze_result_t(uint32_t*, ze_driver_handle_t*))             \
  X(DriverGetIpcProperties, zeDriverGetIpcProperties,                                \
    ze_result_t(ze_driver_handle_t, ze_driver_ipc_properties_t*))                     \
  X(DeviceGet, zeDeviceGet,                                                          \
    ze_result_t(ze_driver_handle_t, uint32_t*, ze_device_handle_t*))                  \
  X(DeviceGetProperties, zeDeviceGetProperties,                                      \
    ze_result_t(ze_device_handle_t, ze_device_properties_t*))                         \
  X(DeviceGetMemoryProperties, zeDeviceGetMemoryProperties,                          \
    ze_result_t(ze_device_handle_t, uint32_t*, ze_device_memory_properties_t*))       \
  X(DeviceGetCommandQueueGroupProperties, zeDeviceGetCommandQueueGroupProperties,    \
    ze_result_t(ze_device_handle_t, uint32_t*, ze_command_queue_group_properties_t*)) \
  X(DevicePciGetPropertiesExt, zeDevicePciGetPropertiesExt,                          \
    ze_result_t(ze_device_handle_t, ze_pci_ext_properties_t*))                        \
  X(ContextCreate, zeContextCreate,                                                  \
    ze_result_t(ze_driver_handle_t, const ze_context_desc_t*, ze_context_handle_t*))  \
  X(ContextDestroy, zeContextDestroy, ze_result_t(ze_context_handle_t))              \
  X(MemAllocDevice, zeMemAllocDevice,                                                \
    ze_result_t(ze_context_handle_t, const ze_device_mem_alloc_desc_t*, size_t,       \
                size_t, ze_device_handle_t, void**))                                  \
  X(MemAllocHost, zeMemAllocHost,                                                    \
    ze_result_t(ze_context_handle_t, const ze_host_mem_alloc_desc_t*, size_t, size_t,  \
                void**))                                                              \
  X(MemFree, zeMemFree, ze_result_t(ze_context_handle_t, void*))                     \
  X(MemGetIpcHandle, zeMemGetIpcHandle,                                              \
    ze_result_t(ze_context_handle_t, const void*, ze_ipc_mem_handle_t*))              \
  X(MemOpenIpcHandle, zeMemOpenIpcHandle,                                            \
    ze_result_t(ze_context_handle_t, ze_device_handle_t, ze_ipc_mem_handle_t,         \
                ze_ipc_memory_flags_t, void**))                                       \
  X(MemCloseIpcHandle, zeMemCloseIpcHandle, ze_result_t(ze_context_handle_t, const void*)) \
  X(CommandListCreateImmediate, zeCommandListCreateImmediate,                        \
    ze_result_t(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t*, \
                ze_command_list_handle_t*))                                           \
  X(CommandListDestroy, zeCommandListDestroy, ze_result_t(ze_command_list_handle_t)) \
  X(CommandListAppendBarrier, zeCommandListAppendBarrier,                            \
    ze_result_t(ze_command_list_handle_t, ze_event_handle_t, uint32_t, ze_event_handle_t*)) \
  X(CommandListAppendMemoryCopy, zeCommandListAppendMemoryCopy,                      \
    ze_result_t(ze_command_list_handle_t, void*, const void*, size_t,                 \
                ze_event_handle_t, uint32_t, ze_event_handle_t*))                     \
  X(CommandListAppendMemoryFill, zeCommandListAppendMemoryFill,                      \
    ze_result_t(ze_command_list_handle_t, void*, const void*, size_t, size_t,         \
                ze_event_handle_t, uint32_t, ze_event_handle_t*))                     \
  X(EventPoolCreate, zeEventPoolCreate,                                              \
    ze_result_t(ze_context_handle_t, const ze_event_pool_desc_t*, uint32_t,           \
                ze_device_handle_t*, ze_event_pool_handle_t*))                        \
  X(EventPoolDestroy, zeEventPoolDestroy, ze_result_t(ze_event_pool_handle_t))       \
  X(EventCreate, zeEventCreate,                                                      \
    ze_result_t(ze_event_pool_handle_t, const ze_event_desc_t*, ze_event_handle_t*))  \
  X(EventDestroy, zeEventDestroy, ze_result_t(ze_event_handle_t))                    \
  X(EventHostSignal, zeEventHostSignal, ze_result_t(ze_event_handle_t))              \
  X(EventHostSynchronize, zeEventHostSynchronize, ze_result_t(ze_event_handle_t, uint64_t)) \
  X(EventQueryStatus, zeEventQueryStatus, ze_result_t(ze_event_handle_t))            \
  X(EventHostReset, zeEventHostReset, ze_result_t(ze_event_handle_t))

// The resolved entry points: api.MemAllocDevice(...) calls zeMemAllocDevice.
struct LoaderApi {
#define MEMD_ZE_FIELD(field, symbol, signature) std::add_pointer_t<signature> field = nullptr;
  MEMD_ZE_ENTRY_POINTS(MEMD_ZE_FIELD)
#undef MEMD_ZE_FIELD
  // zeMemPutIpcHandle (API 1.6, loader 1.10 and later); nullptr with an
  // older loader, which has no way to hand an exported descriptor back.
  ze_result_t (*MemPutIpcHandle)(ze_context_handle_t, ze_ipc_mem_handle_t) = nullptr;
};

/// A GPU a Level Zero driver offers, with the context memd made for it (one
/// per driver, shared by its devices).
struct Gpu {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_context_handle_t context = nullptr;
  std::string uuid = {};  // FormatUuid of the device's UUID.
  std::string name = {};
  std::string pci_address = {};  // "dddd:bb:dd.f"; empty where the driver cannot say.
  std::uint64_t memory_bytes = 0;
  bool ipc = false;  // The driver passes memory between processes.
};

/// A loaded, initialised loader and the GPUs its drivers offer, each with a
/// context. Owns the dlopen handle and the contexts (destroyed with it).
/// Thread-safe: the Level Zero API is, for everything but command lists.
class Loader {
 public:
  // The library memd loads when told nothing: $MEMD_ZE_LOADER, else
  // libze_loader.so.1 from the dynamic linker's search path.
  static std::string DefaultPath();

  // dlopens `path` (empty: DefaultPath()), resolves the entry points, calls
  // zeInit(ZE_INIT_FLAG_GPU_ONLY) and finds every GPU of every driver,
  // making one context per driver. Errors: UNAVAILABLE when the library
  // cannot be loaded or zeInit fails (no Level Zero on this node: the
  // message says why); FAILED_PRECONDITION when it lacks an entry point;
  // Check's for the discovery calls.
  static absl::StatusOr<std::shared_ptr<Loader>> Load(const std::string& path = "");
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  const LoaderApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  const std::vector<Gpu>& gpus() const { return gpus_; }

  // OK for ZE_RESULT_SUCCESS; else a status naming the call, the
  // ze_result_t (name and number) and the device (when >= 0, in the
  // caller's numbering: the daemon's "device:N"). Codes follow
  // what the caller can do: out of device or host memory is
  // RESOURCE_EXHAUSTED; bad arguments, handles and sizes INVALID_ARGUMENT;
  // unsupported UNIMPLEMENTED; an uninitialised or lost device UNAVAILABLE;
  // NOT_READY and the rest INTERNAL.
  absl::Status Check(ze_result_t result, std::string_view call, int device = -1) const;

 private:
  Loader(void* library, std::string path) : library_(library), path_(std::move(path)) {}
  absl::Status Discover();

  void* library_;
  std::string path_;
  LoaderApi api_;
  std::vector<Gpu> gpus_;
  std::vector<ze_context_handle_t> contexts_;
};

// "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", or "ze_result_t 0x..." for a value
// ze_api.h 1.4 does not name.
std::string ResultName(ze_result_t result);

// "ZE-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": a Level Zero device UUID, with
// a prefix that keeps it apart from CUDA's "GPU-" UUIDs.
std::string FormatUuid(const ze_device_uuid_t& uuid);

}  // namespace memd::ze
