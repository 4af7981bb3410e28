// memd FAKE CUDA driver (a test double): host memory the device may use.
// Registered ranges (cuMemHostRegister) and the fake's own pinned
// allocations (cuMemHostAlloc). Need a current context.

#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

// True when every page of [start, start + size) is mapped in this process.
bool IsMapped(uintptr_t start, size_t size) {
  const size_t page = PageSize();
  uintptr_t end = 0;
  size_t rounded_end = 0;
  if (!EndOf(start, size, &end) || !RoundUp(end, page, &rounded_end)) return false;
  unsigned char residency[4096];
  for (uintptr_t at = start & ~(page - 1); at < rounded_end;) {
    const size_t length = std::min<size_t>(rounded_end - at, sizeof(residency) * page);
    if (mincore(AsPointer(at), length, residency) != 0) return false;
    at += length;
  }
  return true;
}

}  // namespace

// ---- Host registration (needs a current context) ----

CUresult FakeDriver::MemHostRegister(void* p, size_t bytesize, unsigned int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  constexpr unsigned int kModelled = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
  constexpr unsigned int kKnown =
      kModelled | CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~kModelled) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  uintptr_t end = 0;
  if (!EndOf(start, bytesize, &end)) return CUDA_ERROR_INVALID_VALUE;
  if (Overlaps(host_, start, end)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (!IsMapped(start, bytesize)) return CUDA_ERROR_INVALID_VALUE;
  host_.emplace(start, HostRegistration{bytesize, context});
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemHostUnregister(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto it = host_.find(reinterpret_cast<uintptr_t>(p));  // The base, as registered.
  // cuMemHostAlloc memory was never registered: cuMemFreeHost frees it.
  if (it == host_.end() || it->second.allocated) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  host_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemHostGetDevicePointer(CUdeviceptr* dptr, void* p, unsigned int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (dptr == nullptr || p == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (Containing(host_, reinterpret_cast<uintptr_t>(p)) == host_.end()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // Unified addressing: the same address.
  return CUDA_SUCCESS;
}

// ---- Pinned host memory ----

CUresult FakeDriver::MemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  constexpr unsigned int kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t mapped = 0;
  if (!RoundUp(bytes, PageSize(), &mapped)) return CUDA_ERROR_OUT_OF_MEMORY;
  // Not locked (CI's RLIMIT_MEMLOCK is small): "pinned" is what the fake
  // records, and what makes copies from it asynchronous.
  void* at = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  host_.emplace(reinterpret_cast<uintptr_t>(at), HostRegistration{bytes, context, true, mapped});
  *pointer = at;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemFreeHost(void* pointer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  auto it = host_.find(reinterpret_cast<uintptr_t>(pointer));
  if (it == host_.end() || !it->second.allocated) return CUDA_ERROR_INVALID_VALUE;
  munmap(pointer, it->second.mapped);
  host_.erase(it);
  return CUDA_SUCCESS;
}

}  // namespace memd::fake_cuda
