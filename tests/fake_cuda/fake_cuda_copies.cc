// memd FAKE CUDA driver (a test double): synchronous copies and memset, and
// which device memory a copy may touch. Need a current context.

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {

CUresult FakeDriver::MemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (bytes == 0) return CUDA_SUCCESS;
  if (src == nullptr || !DeviceAccessible(dst, bytes, /*write=*/true)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::memmove(AsPointer(static_cast<uintptr_t>(dst)), src, bytes);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst == nullptr || !DeviceAccessible(src, bytes, /*write=*/false)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::memmove(dst, AsPointer(static_cast<uintptr_t>(src)), bytes);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemsetD8(CUdeviceptr dst, unsigned char value, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (count == 0) return CUDA_SUCCESS;
  if (!DeviceAccessible(dst, count, /*write=*/true)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(AsPointer(static_cast<uintptr_t>(dst)), value, count);
  return CUDA_SUCCESS;
}

// True when [address, address + bytes) lies in device memory of this
// process that is accessible (writable, for `write`): cuMemAlloc memory,
// IPC-opened memory, registered host memory, or VMM mappings with access.
bool FakeDriver::DeviceAccessible(CUdeviceptr address, size_t bytes, bool write) {
  uintptr_t end = 0;
  if (!EndOf(static_cast<uintptr_t>(address), bytes, &end)) return false;
  for (uintptr_t at = static_cast<uintptr_t>(address); at < end;) {
    if (auto alloc = Containing(legacy_, at); alloc != legacy_.end()) {
      at = alloc->first + alloc->second.size;
    } else if (auto ipc = Containing(ipc_, at); ipc != ipc_.end()) {
      at = ipc->first + ipc->second.size;
    } else if (auto host = Containing(host_, at); host != host_.end()) {
      at = host->first + host->second.size;
    } else if (auto vmm = Containing(mappings_, at);
               vmm != mappings_.end() && (write ? vmm->second.writable : vmm->second.readable)) {
      at = vmm->first + vmm->second.size;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace memd::fake_cuda
