// memd FAKE CUDA driver (a test double): legacy allocations (cuMemAlloc) and
// their IPC handles. Need a current context.

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

// memfd names: the importer of an fd or of an IPC handle reads them back from
// /proc/self/fd to check that it was given the fake's memory.
constexpr char kAllocMemfdPrefix[] = "memd-fake-cuda-alloc:";  // + id (hex)

// What a CUipcMemHandle carries (the rest of its 64 bytes are zero).
struct IpcWire {
  char magic[16];
  uint32_t version;
  int32_t pid;     // The exporting process, which holds the memfd open...
  int32_t fd;      // ...as this descriptor.
  int32_t device;  // Physical: ordinals differ between processes.
  uint64_t id;     // Names the allocation (and its memfd); unique per process.
  uint64_t size;
};
static_assert(sizeof(IpcWire) <= CU_IPC_HANDLE_SIZE);
constexpr char kIpcMagic[16] = "memd-fake-cuda";
constexpr uint32_t kIpcVersion = 1;

}  // namespace

CUresult FakeDriver::MemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t size = 0;
  if (!RoundUp(bytesize, PageSize(), &size)) return CUDA_ERROR_OUT_OF_MEMORY;
  Device& device = *devices_[static_cast<size_t>(context->device)];
  SweepReleased();  // Memory the last import let go of is free again, as for cuMemCreate.
  if (size > memory_ - device.used) return CUDA_ERROR_OUT_OF_MEMORY;
  LegacyAllocation allocation;
  allocation.id = (static_cast<uint64_t>(getpid()) << 32) | ++legacy_count_;
  char name[64];
  std::snprintf(name, sizeof(name), "%s%llx", kAllocMemfdPrefix,
                static_cast<unsigned long long>(allocation.id));
  if (CUresult result = CreateMemfd(name, size, &allocation.fd); result != CUDA_SUCCESS) {
    return result;
  }
  void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, allocation.fd, 0);
  if (at == MAP_FAILED) {
    close(allocation.fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  allocation.size = size;
  allocation.device = context->device;
  allocation.context = context;
  device.used += size;
  legacy_.emplace(reinterpret_cast<uintptr_t>(at), allocation);
  *dptr = reinterpret_cast<CUdeviceptr>(at);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemFree(CUdeviceptr dptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  auto it = legacy_.find(static_cast<uintptr_t>(dptr));
  if (it == legacy_.end()) return CUDA_ERROR_INVALID_VALUE;
  FreeLegacy(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::IpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Only the base of a cuMemAlloc allocation (not VMM or IPC-opened memory).
  auto it = legacy_.find(static_cast<uintptr_t>(dptr));
  if (it == legacy_.end()) return CUDA_ERROR_INVALID_VALUE;
  IpcWire wire{};
  std::memcpy(wire.magic, kIpcMagic, sizeof(wire.magic));
  wire.version = kIpcVersion;
  wire.pid = static_cast<int32_t>(getpid());
  wire.fd = it->second.fd;
  wire.device = devices_[static_cast<size_t>(it->second.device)]->physical;
  wire.id = it->second.id;
  wire.size = it->second.size;
  std::memset(handle->reserved, 0, sizeof(handle->reserved));
  std::memcpy(handle->reserved, &wire, sizeof(wire));
  return CUDA_SUCCESS;
}

CUresult FakeDriver::IpcOpenMemHandle(CUdeviceptr* dptr, const CUipcMemHandle& handle,
                                      unsigned int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  // cuda.h: Flags "must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS".
  if (dptr == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  IpcWire wire;
  std::memcpy(&wire, handle.reserved, sizeof(wire));
  if (std::memcmp(wire.magic, kIpcMagic, sizeof(wire.magic)) != 0 ||
      wire.version != kIpcVersion || wire.pid <= 0 || wire.fd < 0 || wire.size == 0 ||
      wire.size % PageSize() != 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // CUDA refuses a handle in the process that exported it.
  if (wire.pid == static_cast<int32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  // Opened already: CUDA counts the opens and returns the same pointer.
  for (auto& [base, mapping] : ipc_) {
    if (mapping.pid == wire.pid && mapping.id == wire.id) {
      ++mapping.opens;
      *dptr = static_cast<CUdeviceptr>(base);
      return CUDA_SUCCESS;
    }
  }
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", wire.pid, wire.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  // The exporter is gone, freed the memory, or is another user's process.
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  char name[64];
  std::snprintf(name, sizeof(name), "/memfd:%s%llx (deleted)", kAllocMemfdPrefix,
                static_cast<unsigned long long>(wire.id));
  struct stat info;
  if (FdTarget(fd) != name || fstat(fd, &info) != 0 ||
      static_cast<uint64_t>(info.st_size) != wire.size) {
    close(fd);  // The descriptor now holds something else: freed memory.
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const size_t size = static_cast<size_t>(wire.size);
  void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (at == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  ipc_.emplace(reinterpret_cast<uintptr_t>(at),
               IpcMapping{size, static_cast<pid_t>(wire.pid), wire.id, 1, context});
  *dptr = reinterpret_cast<CUdeviceptr>(at);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::IpcCloseMemHandle(CUdeviceptr dptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  auto it = ipc_.find(static_cast<uintptr_t>(dptr));
  if (it == ipc_.end()) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.opens == 0) {
    munmap(AsPointer(it->first), it->second.size);
    ipc_.erase(it);
  }
  return CUDA_SUCCESS;
}

void FakeDriver::FreeLegacy(std::map<uintptr_t, LegacyAllocation>::iterator it) {
  munmap(AsPointer(it->first), it->second.size);
  close(it->second.fd);
  devices_[static_cast<size_t>(it->second.device)]->used -= it->second.size;
  legacy_.erase(it);
}

}  // namespace memd::fake_cuda
