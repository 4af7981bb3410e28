// memd FAKE CUDA driver (a test double): the exported entry points of
// libmemd_fake_cuda.so. Each counts against the fault plan, then calls the
// one FakeDriver (fake_cuda_state.h).

#include <cuda.h>

#include <cstdint>

#include "tests/fake_cuda/fake_cuda_config.h"
#include "tests/fake_cuda/fake_cuda_errors.h"
#include "tests/fake_cuda/fake_cuda_state.h"

namespace memd::fake_cuda {
namespace {

constexpr int kDriverVersion = 13000;

}  // namespace
}  // namespace memd::fake_cuda

// ---- The exported driver API ----
//
// Each symbol is the one cuda.h maps the public name to (cuMemAlloc is
// cuMemAlloc_v2, ...); the library's version script exports these and nothing
// else.

#define MEMD_FAKE_CUDA_API extern "C" __attribute__((visibility("default")))
// MEMD_FAKE_CUDA_FAULTS "symbol@N=CODE": the Nth call returns CODE, doing nothing.
#define MEMD_FAKE_CUDA_INJECT(symbol)                                               \
  if (CUresult injected = memd::fake_cuda::g_driver.Injected(#symbol);             \
      injected != CUDA_SUCCESS) {                                                   \
    return injected;                                                               \
  }

using memd::fake_cuda::g_driver;

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  MEMD_FAKE_CUDA_INJECT(cuGetErrorString)
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = memd::fake_cuda::ErrorDescription(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  MEMD_FAKE_CUDA_INJECT(cuGetErrorName)
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = memd::fake_cuda::ErrorName(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuInit(unsigned int Flags) { return g_driver.Init(Flags); }

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  MEMD_FAKE_CUDA_INJECT(cuDriverGetVersion)
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = memd::fake_cuda::kDriverVersion;
  return CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGet)
  return g_driver.DeviceGet(device, ordinal);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetCount(int* count) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetCount)
  return g_driver.DeviceGetCount(count);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetName)
  return g_driver.DeviceGetName(name, len, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetUuid_v2)
  return g_driver.DeviceGetUuid(uuid, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceTotalMem_v2)
  return g_driver.DeviceTotalMem(bytes, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                                         CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetAttribute)
  return g_driver.DeviceGetAttribute(pi, attrib, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxRetain)
  return g_driver.PrimaryCtxRetain(pctx, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxRelease_v2)
  return g_driver.PrimaryCtxRelease(dev);
}

// Not a CUDA symbol: how many times this load of the fake answered `symbol`
// (e.g. "cuMemImportFromShareableHandle"), for tests that count driver
// calls. Counts every call, also ones a fault answered.
MEMD_FAKE_CUDA_API uint64_t memdFakeCudaCallCount(const char* symbol) {
  return symbol == nullptr ? 0 : g_driver.CallCount(symbol);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                               int* active) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxGetState)
  return g_driver.PrimaryCtxGetState(dev, flags, active);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  MEMD_FAKE_CUDA_INJECT(cuCtxSetCurrent)
  return g_driver.CtxSetCurrent(ctx);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetCurrent)
  return g_driver.CtxGetCurrent(pctx);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetDevice)
  return g_driver.CtxGetDevice(device);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  MEMD_FAKE_CUDA_INJECT(cuMemGetInfo_v2)
  return g_driver.MemGetInfo(free, total);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemGetAllocationGranularity(
    size_t* granularity, const CUmemAllocationProp* prop,
    CUmemAllocationGranularity_flags option) {
  MEMD_FAKE_CUDA_INJECT(cuMemGetAllocationGranularity)
  return g_driver.MemGetAllocationGranularity(granularity, prop, option);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle,
                                                size_t size, const CUmemAllocationProp* prop,
                                                unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemCreate)
  return g_driver.MemCreate(handle, size, prop, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  MEMD_FAKE_CUDA_INJECT(cuMemRelease)
  return g_driver.MemRelease(handle);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size,
                                                        size_t alignment, CUdeviceptr addr,
                                                        unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemAddressReserve)
  return g_driver.MemAddressReserve(ptr, size, alignment, addr, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  MEMD_FAKE_CUDA_INJECT(cuMemAddressFree)
  return g_driver.MemAddressFree(ptr, size);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                             CUmemGenericAllocationHandle handle,
                                             unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemMap)
  return g_driver.MemMap(ptr, size, offset, handle, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  MEMD_FAKE_CUDA_INJECT(cuMemUnmap)
  return g_driver.MemUnmap(ptr, size);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                                   const CUmemAccessDesc* desc, size_t count) {
  MEMD_FAKE_CUDA_INJECT(cuMemSetAccess)
  return g_driver.MemSetAccess(ptr, size, desc, count);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemExportToShareableHandle(
    void* shareableHandle, CUmemGenericAllocationHandle handle,
    CUmemAllocationHandleType handleType, unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemExportToShareableHandle)
  return g_driver.MemExportToShareableHandle(shareableHandle, handle, handleType, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemImportFromShareableHandle(
    CUmemGenericAllocationHandle* handle, void* osHandle,
    CUmemAllocationHandleType shHandleType) {
  MEMD_FAKE_CUDA_INJECT(cuMemImportFromShareableHandle)
  return g_driver.MemImportFromShareableHandle(handle, osHandle, shHandleType);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  MEMD_FAKE_CUDA_INJECT(cuMemAlloc_v2)
  return g_driver.MemAlloc(dptr, bytesize);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuMemFree_v2)
  return g_driver.MemFree(dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle,
                                                      CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuIpcGetMemHandle)
  return g_driver.IpcGetMemHandle(pHandle, dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr,
                                                          CUipcMemHandle handle,
                                                          unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuIpcOpenMemHandle_v2)
  return g_driver.IpcOpenMemHandle(pdptr, handle, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuIpcCloseMemHandle)
  return g_driver.IpcCloseMemHandle(dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize,
                                                         unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostRegister_v2)
  return g_driver.MemHostRegister(p, bytesize, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostUnregister(void* p) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostUnregister)
  return g_driver.MemHostUnregister(p);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                                 unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostGetDevicePointer_v2)
  return g_driver.MemHostGetDevicePointer(pdptr, p, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost,
                                                    size_t ByteCount) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyHtoD_v2)
  return g_driver.MemcpyHtoD(dstDevice, srcHost, ByteCount);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice,
                                                    size_t ByteCount) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoH_v2)
  return g_driver.MemcpyDtoH(dstHost, srcDevice, ByteCount);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc,
                                                  size_t N) {
  MEMD_FAKE_CUDA_INJECT(cuMemsetD8_v2)
  return g_driver.MemsetD8(dstDevice, uc, N);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostAlloc)
  return g_driver.MemHostAlloc(pp, bytesize, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemFreeHost(void* p) {
  MEMD_FAKE_CUDA_INJECT(cuMemFreeHost)
  return g_driver.MemFreeHost(p);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority,
                                                                int* greatestPriority) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetStreamPriorityRange)
  return g_driver.CtxGetStreamPriorityRange(leastPriority, greatestPriority);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream,
                                                               unsigned int flags,
                                                               int priority) {
  MEMD_FAKE_CUDA_INJECT(cuStreamCreateWithPriority)
  return g_driver.StreamCreateWithPriority(phStream, flags, priority);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuStreamDestroy_v2)
  return g_driver.StreamDestroy(hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuStreamSynchronize)
  return g_driver.StreamSynchronize(hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                                      unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuStreamWaitEvent)
  return g_driver.StreamWaitEvent(hStream, hEvent, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuEventCreate)
  return g_driver.EventCreate(phEvent, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventDestroy_v2)
  return g_driver.EventDestroy(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuEventRecord)
  return g_driver.EventRecord(hEvent, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventQuery)
  return g_driver.EventQuery(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventSynchronize)
  return g_driver.EventSynchronize(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice,
                                                         const void* srcHost, size_t ByteCount,
                                                         CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyHtoDAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kHostToDevice, static_cast<uintptr_t>(dstDevice),
                              reinterpret_cast<uintptr_t>(srcHost), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice,
                                                         size_t ByteCount, CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoHAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kDeviceToHost, reinterpret_cast<uintptr_t>(dstHost),
                              static_cast<uintptr_t>(srcDevice), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice,
                                                         CUdeviceptr srcDevice, size_t ByteCount,
                                                         CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoDAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kDeviceToDevice,
                              static_cast<uintptr_t>(dstDevice),
                              static_cast<uintptr_t>(srcDevice), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                                     void* userData) {
  MEMD_FAKE_CUDA_INJECT(cuLaunchHostFunc)
  return g_driver.LaunchHostFunc(hStream, fn, userData);
}
