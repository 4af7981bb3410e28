#pragma once

// The CUDA driver, loaded at run time. memd never links libcuda: the same
// binary runs on nodes without a GPU (no driver simply means no CUDA
// devices), and tests point it at a fake driver built by the project.

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::cuda {

// Every entry point memd calls, by the symbol cuda.h maps its name to
// (cuMemAlloc is cuMemAlloc_v2, ...): X(field, symbol, signature).
#define MEMD_CUDA_DRIVER_ENTRY_POINTS(X)                                          \
  X(GetErrorName, cuGetErrorName, CUresult(CUresult, const char**))              \
  X(GetErrorString, cuGetErrorString, CUresult(CUresult, const char**))          \
  X(Init, cuInit, CUresult(unsigned int))                                         \
  X(DriverGetVersion, cuDriverGetVersion, CUresult(int*))                         \
  X(DeviceGet, cuDeviceGet, CUresult(CUdevice*, int))                             \
  X(DeviceGetCount, cuDeviceGetCount, CUresult(int*))                             \
  X(DeviceGetName, cuDeviceGetName, CUresult(char*, int, CUdevice))               \
  X(DeviceGetUuid, cuDeviceGetUuid_v2, CUresult(CUuuid*, CUdevice))               \
  X(DeviceTotalMem, cuDeviceTotalMem_v2, CUresult(size_t*, CUdevice))             \
  X(DeviceGetAttribute, cuDeviceGetAttribute,                                     \
    CUresult(int*, CUdevice_attribute, CUdevice))                                 \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, CUresult(CUcontext*, CUdevice)) \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, CUresult(CUdevice))    \
  X(CtxSetCurrent, cuCtxSetCurrent, CUresult(CUcontext))                          \
  X(CtxGetCurrent, cuCtxGetCurrent, CUresult(CUcontext*))                         \
  X(CtxGetDevice, cuCtxGetDevice, CUresult(CUdevice*))                            \
  X(MemGetInfo, cuMemGetInfo_v2, CUresult(size_t*, size_t*))                      \
  X(MemGetAllocationGranularity, cuMemGetAllocationGranularity,                   \
    CUresult(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)) \
  X(MemCreate, cuMemCreate,                                                       \
    CUresult(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,   \
             unsigned long long))                                                  \
  X(MemRelease, cuMemRelease, CUresult(CUmemGenericAllocationHandle))             \
  X(MemAddressReserve, cuMemAddressReserve,                                       \
    CUresult(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))      \
  X(MemAddressFree, cuMemAddressFree, CUresult(CUdeviceptr, size_t))              \
  X(MemMap, cuMemMap,                                                             \
    CUresult(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,           \
             unsigned long long))                                                  \
  X(MemUnmap, cuMemUnmap, CUresult(CUdeviceptr, size_t))                          \
  X(MemSetAccess, cuMemSetAccess,                                                 \
    CUresult(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))                \
  X(MemExportToShareableHandle, cuMemExportToShareableHandle,                     \
    CUresult(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,      \
             unsigned long long))                                                  \
  X(MemImportFromShareableHandle, cuMemImportFromShareableHandle,                 \
    CUresult(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType))    \
  X(MemAlloc, cuMemAlloc_v2, CUresult(CUdeviceptr*, size_t))                      \
  X(MemFree, cuMemFree_v2, CUresult(CUdeviceptr))                                 \
  X(IpcGetMemHandle, cuIpcGetMemHandle, CUresult(CUipcMemHandle*, CUdeviceptr))   \
  X(IpcOpenMemHandle, cuIpcOpenMemHandle_v2,                                      \
    CUresult(CUdeviceptr*, CUipcMemHandle, unsigned int))                         \
  X(IpcCloseMemHandle, cuIpcCloseMemHandle, CUresult(CUdeviceptr))                \
  X(MemHostRegister, cuMemHostRegister_v2, CUresult(void*, size_t, unsigned int)) \
  X(MemHostUnregister, cuMemHostUnregister, CUresult(void*))                      \
  X(MemHostGetDevicePointer, cuMemHostGetDevicePointer_v2,                        \
    CUresult(CUdeviceptr*, void*, unsigned int))                                  \
  X(MemcpyHtoD, cuMemcpyHtoD_v2, CUresult(CUdeviceptr, const void*, size_t))      \
  X(MemcpyDtoH, cuMemcpyDtoH_v2, CUresult(void*, CUdeviceptr, size_t))            \
  X(MemsetD8, cuMemsetD8_v2, CUresult(CUdeviceptr, unsigned char, size_t))       \
  X(MemHostAlloc, cuMemHostAlloc, CUresult(void**, size_t, unsigned int))         \
  X(MemFreeHost, cuMemFreeHost, CUresult(void*))                                  \
  X(CtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange, CUresult(int*, int*)) \
  X(StreamCreateWithPriority, cuStreamCreateWithPriority,                         \
    CUresult(CUstream*, unsigned int, int))                                       \
  X(StreamDestroy, cuStreamDestroy_v2, CUresult(CUstream))                        \
  X(StreamSynchronize, cuStreamSynchronize, CUresult(CUstream))                   \
  X(StreamWaitEvent, cuStreamWaitEvent, CUresult(CUstream, CUevent, unsigned int)) \
  X(EventCreate, cuEventCreate, CUresult(CUevent*, unsigned int))                 \
  X(EventDestroy, cuEventDestroy_v2, CUresult(CUevent))                           \
  X(EventRecord, cuEventRecord, CUresult(CUevent, CUstream))                      \
  X(EventQuery, cuEventQuery, CUresult(CUevent))                                  \
  X(EventSynchronize, cuEventSynchronize, CUresult(CUevent))                      \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2,                                        \
    CUresult(CUdeviceptr, const void*, size_t, CUstream))                         \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2,                                        \
    CUresult(void*, CUdeviceptr, size_t, CUstream))                               \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2,                                        \
    CUresult(CUdeviceptr, CUdeviceptr, size_t, CUstream))                         \
  X(LaunchHostFunc, cuLaunchHostFunc, CUresult(CUstream, CUhostFn, void*))

// The resolved entry points: api.MemCreate(...) calls cuMemCreate.
struct DriverApi {
#define MEMD_CUDA_FIELD(field, symbol, signature) \
  std::add_pointer_t<signature> field = nullptr;
  MEMD_CUDA_DRIVER_ENTRY_POINTS(MEMD_CUDA_FIELD)
#undef MEMD_CUDA_FIELD
};

/// A loaded and initialised CUDA driver. Owns the dlopen handle (the library
/// stays loaded while any reference lives). Thread-safe (the driver API is).
class Driver {
 public:
  // The library memd loads when told nothing: $MEMD_CUDA_DRIVER, else
  // libcuda.so.1 from the loader's search path.
  static std::string DefaultPath();

  // dlopens `path` (empty: DefaultPath()), resolves every entry point and
  // calls cuInit(0). Errors: UNAVAILABLE when the library cannot be loaded
  // or cuInit fails (the node has no usable CUDA: the message says why);
  // FAILED_PRECONDITION when it lacks an entry point memd needs (too old).
  static absl::StatusOr<std::shared_ptr<Driver>> Load(const std::string& path = "");
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const DriverApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  int version() const { return version_; }

  // OK for CUDA_SUCCESS; else a status naming the call, the CUresult (name
  // and description) and the device (when >= 0). Codes follow what the
  // caller can do: out of memory is RESOURCE_EXHAUSTED, no context
  // FAILED_PRECONDITION, bad values INVALID_ARGUMENT, unsupported
  // UNIMPLEMENTED, a driver gone UNAVAILABLE, the rest INTERNAL.
  absl::Status Check(CUresult result, std::string_view call, int device = -1) const;

  // The UUID of this process's device `ordinal`, as FormatUuid writes it:
  // what names a GPU across processes, whose ordinals differ when
  // CUDA_VISIBLE_DEVICES or a container shows each a different set.
  // Errors: Check's, for cuDeviceGet and cuDeviceGetUuid.
  absl::StatusOr<std::string> DeviceUuid(int ordinal) const;

 private:
  Driver(void* library, std::string path) : library_(library), path_(std::move(path)) {}

  void* library_;
  std::string path_;
  DriverApi api_;
  int version_ = 0;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints UUIDs.
std::string FormatUuid(const CUuuid& uuid);

}  // namespace memd::cuda
