// memd FAKE Level Zero driver (a test double): device and host memory, and
// IPC handles in Intel's layout.
//
// Device memory is a memfd named "memd-fake-ze-device:<index>", committed with
// fallocate (running out of host memory is an error at the allocation, never
// a SIGBUS later). The caller's device pointer is a PROT_NONE reservation, so
// the host cannot dereference it, as on a discrete GPU; the fake's commands
// use a private shared mapping of the memfd instead. An IPC handle carries a
// dup of the memfd, which exposes MEMD_FAKE_ZE_POOL_OFFSET bytes before the
// allocation, as Intel's 2 MB pools do.

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {
namespace {

constexpr char kMemfdPrefix[] = "memd-fake-ze-device:";  // + device index.
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
constexpr uint64_t kDevicePageSize = uint64_t{64} << 10;  // What allocations report.

// Intel's compute-runtime IpcMemoryData (level_zero/core/source/context/
// context.h), at the start of the 64-byte ze_ipc_mem_handle_t; zeros follow.
#pragma pack(push, 1)
struct IpcMemoryData {
  uint64_t handle;       // The dma-buf fd (here a memfd), a number in the holder's process.
  uint64_t pool_offset;  // Where the allocation starts in it.
  uint8_t type;          // 0 device, 1 host.
};
#pragma pack(pop)
static_assert(sizeof(IpcMemoryData) == 17 && sizeof(IpcMemoryData) <= ZE_MAX_IPC_HANDLE_SIZE);

size_t RoundUp(size_t size, size_t to) { return (size + to - 1) / to * to; }

// An inaccessible range of RoundUp(size, page) bytes aligned to `alignment`.
void* Reserve(size_t size, size_t alignment) {
  size_t length = RoundUp(size, kPageSize);
  size_t extra = alignment > kPageSize ? alignment : 0;
  void* raw = mmap(nullptr, length + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = extra != 0 ? RoundUp(start, alignment) : start;
  if (aligned > start) munmap(raw, aligned - start);
  if (start + extra > aligned) munmap(reinterpret_cast<void*>(aligned + length), start + extra - aligned);
  return reinterpret_cast<void*>(aligned);
}

// Maps `length` bytes of `fd` from `offset` for the fake's own use.
unsigned char* MapShadow(int fd, uint64_t offset, size_t length) {
  void* address = mmap(nullptr, RoundUp(length, kPageSize), PROT_READ | PROT_WRITE, MAP_SHARED,
                       fd, static_cast<off_t>(offset));
  return address == MAP_FAILED ? nullptr : static_cast<unsigned char*>(address);
}

// The reservation and shadow of `length` bytes of `fd` from `offset`; nullptr
// if mapping fails. Takes `fd` (closed with the mapping) if `own_fd`.
std::shared_ptr<Mapping> MapDeviceRange(int fd, bool own_fd, uint64_t offset, size_t length,
                                        size_t alignment) {
  auto mapping = std::make_shared<Mapping>();
  if (own_fd) mapping->fd = fd;
  mapping->reservation = Reserve(length, alignment);
  if (mapping->reservation == nullptr) return nullptr;
  mapping->reservation_size = RoundUp(length, kPageSize);
  mapping->memory = MapShadow(fd, offset, length);
  if (mapping->memory == nullptr) return nullptr;
  mapping->memory_size = RoundUp(length, kPageSize);
  return mapping;
}

// A committed memfd for one device allocation: pool_offset + size bytes.
int NewBackingMemfd(int device, uint64_t bytes) {
  std::string name = kMemfdPrefix + std::to_string(device);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::shared_ptr<Mapping> NewHostMapping(size_t size, size_t alignment) {
  auto mapping = std::make_shared<Mapping>();
  void* address = Reserve(size, alignment);
  if (address == nullptr) return nullptr;
  mapping->memory = static_cast<unsigned char*>(address);
  mapping->memory_size = RoundUp(size, kPageSize);
  if (mprotect(address, mapping->memory_size, PROT_READ | PROT_WRITE) != 0) return nullptr;
  return mapping;
}

Allocation* Register(State& state, MemoryKind kind, ze_context_handle_t context,
                     ze_device_handle_t device, std::shared_ptr<Mapping> mapping, size_t size) {
  auto allocation = std::make_unique<Allocation>();
  allocation->kind = kind;
  allocation->context = context;
  allocation->device = device;
  allocation->base = reinterpret_cast<uintptr_t>(
      kind == MemoryKind::kHost ? static_cast<void*>(mapping->memory) : mapping->reservation);
  allocation->size = size;
  allocation->id = state.next_allocation_id++;
  allocation->mapping = std::move(mapping);
  Allocation* result = allocation.get();
  state.memory[result->base] = std::move(allocation);
  return result;
}

// The checks every memory call starts with.
ze_result_t EnterContext(State& state, Api api, ze_context_handle_t context) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (context == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.contexts.Contains(context)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

ze_result_t CheckSizeAndAlignment(size_t size, size_t alignment) {
  if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
    return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
  }
  return ZE_RESULT_SUCCESS;
}

// The allocation `ptr` is the base of, if it is of `kind` and `context`.
Allocation* FindBase(State& state, ze_context_handle_t context, const void* ptr, MemoryKind kind) {
  auto it = state.memory.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == state.memory.end()) return nullptr;
  Allocation* allocation = it->second.get();
  if (allocation->context != context || allocation->kind != kind) return nullptr;
  return allocation;
}

}  // namespace

ze_result_t MemAllocDevice(ze_context_handle_t hContext, const ze_device_mem_alloc_desc_t* device_desc,
                           size_t size, size_t alignment, ze_device_handle_t hDevice, void** pptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemAllocDevice, hContext)) return result;
  if (hDevice == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (device_desc == nullptr || pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (device_desc->flags > 0x7) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (ze_result_t result = CheckSizeAndAlignment(size, alignment)) return result;
  if (state.Device(hDevice) == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (size > state.config.memory - hDevice->used) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  const uint64_t offset = state.config.pool_offset;
  int fd = NewBackingMemfd(hDevice->index, offset + size);
  if (fd < 0) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  std::shared_ptr<Mapping> mapping = MapDeviceRange(fd, /*own_fd=*/true, offset, size, alignment);
  if (mapping == nullptr) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  Allocation* allocation =
      Register(state, MemoryKind::kDevice, hContext, hDevice, std::move(mapping), size);
  hDevice->used += size;
  *pptr = reinterpret_cast<void*>(allocation->base);
  return ZE_RESULT_SUCCESS;
}

ze_result_t MemAllocHost(ze_context_handle_t hContext, const ze_host_mem_alloc_desc_t* host_desc,
                         size_t size, size_t alignment, void** pptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemAllocHost, hContext)) return result;
  if (host_desc == nullptr || pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (host_desc->flags > 0xf) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (ze_result_t result = CheckSizeAndAlignment(size, alignment)) return result;
  std::shared_ptr<Mapping> mapping = NewHostMapping(size, alignment);
  if (mapping == nullptr) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  Allocation* allocation =
      Register(state, MemoryKind::kHost, hContext, nullptr, std::move(mapping), size);
  *pptr = reinterpret_cast<void*>(allocation->base);
  return ZE_RESULT_SUCCESS;
}

ze_result_t MemAllocShared(ze_context_handle_t hContext, const ze_device_mem_alloc_desc_t* device_desc,
                           const ze_host_mem_alloc_desc_t* host_desc, size_t size, size_t alignment,
                           ze_device_handle_t, void** pptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemAllocShared, hContext)) return result;
  if (device_desc == nullptr || host_desc == nullptr || pptr == nullptr) {
    return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  }
  if (ze_result_t result = CheckSizeAndAlignment(size, alignment)) return result;
  return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;  // Not modelled.
}

namespace {

// IPC cache on: closes the exported fd zeMemFree owns, unless the caller
// already closed it (or it now names another file), which it must not.
void ReleaseCachedFd(State& state, Allocation& allocation) {
  if (allocation.cached_fd < 0) return;
  struct stat now {};
  if (fstat(allocation.cached_fd, &now) != 0 || now.st_dev != allocation.cached_dev ||
      now.st_ino != allocation.cached_ino) {
    ++state.cached_fd_misuse;
    std::fprintf(stderr,
                 "memd fake Level Zero driver: zeMemFree: the cached IPC fd %d was closed by "
                 "its caller (it belongs to the driver)\n",
                 allocation.cached_fd);
  } else {
    close(allocation.cached_fd);
  }
  allocation.cached_fd = -1;
}

}  // namespace

ze_result_t MemFree(ze_context_handle_t hContext, void* ptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemFree, hContext)) return result;
  if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  Allocation* allocation = FindBase(state, hContext, ptr, MemoryKind::kDevice);
  if (allocation == nullptr) allocation = FindBase(state, hContext, ptr, MemoryKind::kHost);
  if (allocation == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (allocation->device != nullptr) allocation->device->used -= allocation->size;
  ReleaseCachedFd(state, *allocation);
  // Commands still in flight keep the mapping until they complete.
  state.memory.erase(allocation->base);
  return ZE_RESULT_SUCCESS;
}

ze_result_t MemGetAllocProperties(ze_context_handle_t hContext, const void* ptr,
                                  ze_memory_allocation_properties_t* pMemAllocProperties,
                                  ze_device_handle_t* phDevice) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemGetAllocProperties, hContext)) {
    return result;
  }
  if (ptr == nullptr || pMemAllocProperties == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  bool straddles = false;
  Allocation* allocation = state.FindMemory(reinterpret_cast<uintptr_t>(ptr), 1, &straddles);
  if (allocation != nullptr && allocation->context != hContext) allocation = nullptr;
  pMemAllocProperties->type = ZE_MEMORY_TYPE_UNKNOWN;
  pMemAllocProperties->id = 0;
  pMemAllocProperties->pageSize = 0;
  if (phDevice != nullptr) *phDevice = allocation != nullptr ? allocation->device : nullptr;
  if (allocation == nullptr) return ZE_RESULT_SUCCESS;
  bool host = allocation->kind == MemoryKind::kHost;
  pMemAllocProperties->type = host ? ZE_MEMORY_TYPE_HOST : ZE_MEMORY_TYPE_DEVICE;
  pMemAllocProperties->id = allocation->id;
  pMemAllocProperties->pageSize = host ? kPageSize : kDevicePageSize;
  return ZE_RESULT_SUCCESS;
}

ze_result_t MemGetAddressRange(ze_context_handle_t hContext, const void* ptr, void** pBase,
                               size_t* pSize) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemGetAddressRange, hContext)) return result;
  if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  bool straddles = false;
  Allocation* allocation = state.FindMemory(reinterpret_cast<uintptr_t>(ptr), 1, &straddles);
  if (allocation == nullptr || allocation->context != hContext) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  if (pBase != nullptr) *pBase = reinterpret_cast<void*>(allocation->base);
  if (pSize != nullptr) *pSize = allocation->size;
  return ZE_RESULT_SUCCESS;
}

namespace {

// The fd a handle carries: the cached dup (IPC cache on), or a fresh one.
int ExportFd(State& state, Allocation& allocation) {
  if (!state.config.ipc_cache) return fcntl(allocation.mapping->fd, F_DUPFD_CLOEXEC, 0);
  if (allocation.cached_fd < 0) {
    int fd = fcntl(allocation.mapping->fd, F_DUPFD_CLOEXEC, 0);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) {
      if (fd >= 0) close(fd);
      return -1;
    }
    allocation.cached_fd = fd;
    allocation.cached_dev = st.st_dev;
    allocation.cached_ino = st.st_ino;
  }
  return allocation.cached_fd;
}

}  // namespace

ze_result_t MemGetIpcHandle(ze_context_handle_t hContext, const void* ptr,
                            ze_ipc_mem_handle_t* pIpcHandle) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemGetIpcHandle, hContext)) return result;
  if (ptr == nullptr || pIpcHandle == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  Allocation* allocation = FindBase(state, hContext, ptr, MemoryKind::kDevice);
  if (allocation == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  int fd = ExportFd(state, *allocation);
  if (fd < 0) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  IpcMemoryData data{static_cast<uint64_t>(fd), state.config.pool_offset, 0};
  std::memset(pIpcHandle->data, 0, sizeof(pIpcHandle->data));
  std::memcpy(pIpcHandle->data, &data, sizeof(data));
  ++state.ipc_get_calls;
  return ZE_RESULT_SUCCESS;
}

namespace {

// The device index of a fake device memfd open as `fd` in this process, or -1.
int FakeMemfdDevice(int fd) {
  char link[PATH_MAX];
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  ssize_t length = readlink(path.c_str(), link, sizeof(link) - 1);
  if (length <= 0) return -1;
  link[length] = '\0';
  std::string expected = std::string("/memfd:") + kMemfdPrefix;
  if (std::strncmp(link, expected.c_str(), expected.size()) != 0) return -1;
  const char* digits = link + expected.size();
  int device = 0;
  for (; *digits >= '0' && *digits <= '9'; ++digits) device = device * 10 + (*digits - '0');
  return device < kMaxDevices ? device : -1;
}

}  // namespace

ze_result_t MemOpenIpcHandle(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                             ze_ipc_mem_handle_t handle, ze_ipc_memory_flags_t flags, void** pptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemOpenIpcHandle, hContext)) return result;
  if (hDevice == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (flags > 0x3) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (state.Device(hDevice) == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  IpcMemoryData data;
  std::memcpy(&data, handle.data, sizeof(data));
  struct stat st {};
  if (data.handle > INT_MAX || data.type != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  int fd = static_cast<int>(data.handle);
  if (FakeMemfdDevice(fd) != hDevice->index || fstat(fd, &st) != 0) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (data.pool_offset % kPageSize != 0 || data.pool_offset >= file_size) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  size_t length = file_size - data.pool_offset;
  // The mapping keeps the memory; the caller keeps (and closes) its fd.
  std::shared_ptr<Mapping> mapping = MapDeviceRange(fd, false, data.pool_offset, length, 0);
  if (mapping == nullptr) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
  Allocation* allocation =
      Register(state, MemoryKind::kIpc, hContext, hDevice, std::move(mapping), length);
  ++state.ipc_open_calls;
  *pptr = reinterpret_cast<void*>(allocation->base);
  return ZE_RESULT_SUCCESS;
}

ze_result_t MemCloseIpcHandle(ze_context_handle_t hContext, const void* ptr) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterContext(state, Api::kMemCloseIpcHandle, hContext)) return result;
  if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  Allocation* allocation = FindBase(state, hContext, ptr, MemoryKind::kIpc);
  if (allocation == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  state.memory.erase(allocation->base);
  ++state.ipc_close_calls;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ResolveSpan(State& state, ze_context_handle_t context, const void* ptr, size_t size,
                        Span* span) {
  uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (address + size < address) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  bool straddles = false;
  Allocation* allocation = state.FindMemory(address, size, &straddles);
  if (straddles) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (allocation == nullptr) {
    span->address = static_cast<unsigned char*>(const_cast<void*>(ptr));  // Plain host memory.
    return ZE_RESULT_SUCCESS;
  }
  if (allocation->kind == MemoryKind::kDevice && allocation->context != context) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  span->address = allocation->mapping->memory + (address - allocation->base);
  span->keep = allocation->mapping;
  return ZE_RESULT_SUCCESS;
}

}  // namespace memd::fake_ze
