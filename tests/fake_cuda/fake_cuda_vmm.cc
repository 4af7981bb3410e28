// memd FAKE CUDA driver (a test double): virtual memory management. Generic
// allocations (cuMemCreate memfds, and imports of their fds), address
// reservations, mappings and their access. No context needed.

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

constexpr size_t kGranularity = size_t{2} << 20;  // Minimum and recommended.

// memfd names: the importer of an fd or of an IPC handle reads them back from
// /proc/self/fd to check that it was given the fake's memory.
constexpr char kVmmMemfdPrefix[] = "memd-fake-cuda-vmm:";  // + physical device

}  // namespace

CUresult FakeDriver::MemGetAllocationGranularity(size_t* granularity,
                                                 const CUmemAllocationProp* prop,
                                                 CUmemAllocationGranularity_flags option) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !ValidDevice(prop->location.id)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                               const CUmemAllocationProp* prop, unsigned long long flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!vmm_) return CUDA_ERROR_NOT_SUPPORTED;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
      prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
    return CUDA_ERROR_NOT_SUPPORTED;  // Valid in CUDA, not modelled here.
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
      prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->win32HandleMetaData != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  Device& device = *devices_[static_cast<size_t>(prop->location.id)];
  SweepReleased();
  if (size > memory_ - device.used) return CUDA_ERROR_OUT_OF_MEMORY;
  VmmAllocation allocation;
  const std::string name = kVmmMemfdPrefix + std::to_string(device.physical);
  if (CUresult result = CreateMemfd(name, size, &allocation.fd); result != CUDA_SUCCESS) {
    return result;
  }
  allocation.size = size;
  allocation.device = prop->location.id;
  allocation.charged = true;
  allocation.exportable =
      prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  device.used += size;
  *handle = next_handle_++;
  allocations_.emplace(*handle, allocation);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = allocations_.find(handle);
  if (it == allocations_.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  MaybeDestroy(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  const size_t page = PageSize();
  if (ptr == nullptr || flags != 0 || size == 0 || size % page != 0 ||
      addr % page != 0 || (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t align = std::max(alignment, kGranularity);
  constexpr int kProt = PROT_NONE;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  uintptr_t base = 0;
  if (addr != 0 && addr % align == 0) {  // Honour the hint when it is free.
    void* at = mmap(AsPointer(addr), size, kProt, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (at != MAP_FAILED && reinterpret_cast<uintptr_t>(at) == addr) {
      base = addr;
    } else if (at != MAP_FAILED) {
      munmap(at, size);  // A kernel without MAP_FIXED_NOREPLACE put it elsewhere.
    }
  }
  if (base == 0) {
    if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
    void* raw = mmap(nullptr, size + align, kProt, kFlags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    base = (start + align - 1) & ~(align - 1);
    if (base > start) munmap(raw, base - start);
    const size_t tail = start + size + align - (base + size);
    if (tail > 0) munmap(AsPointer(base + size), tail);
  }
  reservations_.emplace(base, size);
  *ptr = static_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemAddressFree(CUdeviceptr ptr, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = reservations_.find(static_cast<uintptr_t>(ptr));
  if (it == reservations_.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  // Stricter than CUDA documents: unmap first, so leaks show up in tests.
  if (Overlaps(mappings_, it->first, it->first + size)) return CUDA_ERROR_INVALID_VALUE;
  munmap(AsPointer(it->first), size);
  reservations_.erase(it);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  const uintptr_t start = static_cast<uintptr_t>(ptr);
  uintptr_t end = 0;
  if (flags != 0 || offset != 0 || size == 0 || start % kGranularity != 0 ||
      size % kGranularity != 0 || !EndOf(start, size, &end)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto allocation = allocations_.find(handle);
  if (allocation == allocations_.end() || allocation->second.released) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (size > allocation->second.size) {
    // Mapping more than an imported allocation holds: the real driver
    // (H200, 580) answered CUDA_ERROR_NOT_SUPPORTED. Not measured for an
    // allocation made in the same process.
    return allocation->second.charged ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
  }
  auto reservation = ReservationContaining(start);
  if (reservation == reservations_.end() || end > reservation->first + reservation->second) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (Overlaps(mappings_, start, end)) return CUDA_ERROR_INVALID_VALUE;
  // Mapped without access: cuMemSetAccess grants it.
  void* at = mmap(AsPointer(start), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                  allocation->second.fd, 0);
  if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  ++allocation->second.mappings;
  mappings_.emplace(start, VmmMapping{size, handle, false, false});
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  std::vector<uintptr_t> bases;
  if (!WholeMappings(static_cast<uintptr_t>(ptr), size, &bases)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (uintptr_t base : bases) {
    auto mapping = mappings_.find(base);
    // Back to a reservation: inaccessible anonymous address space.
    mmap(AsPointer(base), mapping->second.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    auto allocation = allocations_.find(mapping->second.handle);
    --allocation->second.mappings;
    mappings_.erase(mapping);
    MaybeDestroy(allocation);
  }
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                  size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  bool readable = false;
  bool writable = false;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
    switch (desc[i].flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_NONE:
        break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ:
        readable = true;
        break;
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
        readable = writable = true;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::vector<uintptr_t> bases;
  if (!WholeMappings(static_cast<uintptr_t>(ptr), size, &bases)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The fake's devices all see host memory: the most any device was granted
  // is what the process gets.
  const int prot = writable ? PROT_READ | PROT_WRITE : readable ? PROT_READ : PROT_NONE;
  if (mprotect(AsPointer(static_cast<uintptr_t>(ptr)), size, prot) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (uintptr_t base : bases) {
    mappings_[base].readable = readable;
    mappings_[base].writable = writable;
  }
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemExportToShareableHandle(void* shareable,
                                                CUmemGenericAllocationHandle handle,
                                                CUmemAllocationHandleType type,
                                                unsigned long long flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto it = allocations_.find(handle);
  if (it == allocations_.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if (!it->second.exportable) return CUDA_ERROR_INVALID_VALUE;
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;  // Out of descriptors.
  *static_cast<int*>(shareable) = fd;           // The caller owns it.
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                  void* os_handle,
                                                  CUmemAllocationHandleType type) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  if (!vmm_) return CUDA_ERROR_NOT_SUPPORTED;
  const intptr_t value = static_cast<intptr_t>(reinterpret_cast<uintptr_t>(os_handle));
  if (value < 0 || value > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
  const int fd = static_cast<int>(value);
  if (fcntl(fd, F_GETFD) < 0) return CUDA_ERROR_INVALID_VALUE;
  // Only memory a fake cuMemCreate made:
  // "/memfd:memd-fake-cuda-vmm:<physical device> (deleted)".
  const std::string target = FdTarget(fd);
  const std::string prefix = std::string("/memfd:") + kVmmMemfdPrefix;
  // An open descriptor of something else: the real driver (H200, 580)
  // answered a memfd with CUDA_ERROR_UNKNOWN.
  if (target.compare(0, prefix.size(), prefix) != 0) return CUDA_ERROR_UNKNOWN;
  const int physical = std::atoi(target.c_str() + prefix.size());
  // A device this machine (MEMD_FAKE_CUDA_DEVICES) does not have.
  if (physical < 0 || physical >= physical_count_) return CUDA_ERROR_NOT_SUPPORTED;
  // One it has but CUDA_VISIBLE_DEVICES hides from this process.
  const int device = LocalOrdinal(physical);
  if (device < 0) return CUDA_ERROR_INVALID_DEVICE;
  struct stat info;
  if (fstat(fd, &info) != 0 || info.st_size <= 0 ||
      static_cast<uint64_t>(info.st_size) % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  VmmAllocation allocation;
  // The caller keeps its fd. An open file description of the import's
  // own, read-locked while the import lives: the exporter's driver sees
  // the lock and counts the memory used after its own cuMemRelease, as
  // the real driver does while any process holds an import (HeldByImports).
  allocation.fd = OpenPrivately(fd);
  if (allocation.fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  struct flock hold{};
  hold.l_type = F_RDLCK;
  hold.l_whence = SEEK_SET;
  (void)fcntl(allocation.fd, F_OFD_SETLK, &hold);
  allocation.size = static_cast<size_t>(info.st_size);
  allocation.device = device;
  allocation.charged = false;  // The exporter's device holds the memory.
  // The real driver will not export an imported allocation again
  // (CUDA_ERROR_INVALID_VALUE, seen on an H200 with driver 580): whoever
  // must hand it on keeps the descriptor it imported.
  allocation.exportable = false;
  *handle = next_handle_++;
  allocations_.emplace(*handle, allocation);
  return CUDA_SUCCESS;
}

std::map<uintptr_t, size_t>::iterator FakeDriver::ReservationContaining(uintptr_t address) {
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin()) return reservations_.end();
  --it;
  return address - it->first < it->second ? it : reservations_.end();
}

// The bases of the mappings that exactly tile [start, start + size); false
// when the range is not made of whole, adjacent mappings.
bool FakeDriver::WholeMappings(uintptr_t start, size_t size, std::vector<uintptr_t>* bases) const {
  uintptr_t end = 0;
  if (size == 0 || !EndOf(start, size, &end)) return false;
  for (uintptr_t at = start; at < end;) {
    auto it = mappings_.find(at);
    if (it == mappings_.end()) return false;
    bases->push_back(at);
    at += it->second.size;
    if (at > end) return false;
  }
  return true;
}

// Frees a VMM allocation once it is released and no longer mapped.
void FakeDriver::MaybeDestroy(std::map<CUmemGenericAllocationHandle, VmmAllocation>::iterator it) {
  VmmAllocation& allocation = it->second;
  if (!allocation.released || allocation.mappings > 0) return;
  if (allocation.charged && HeldByImports(allocation.fd)) {
    // Released here, imported elsewhere: still used until the last import
    // goes (SweepReleased).
    released_.push_back(allocation);
  } else {
    if (allocation.charged) {
      devices_[static_cast<size_t>(allocation.device)]->used -= allocation.size;
    }
    close(allocation.fd);
  }
  allocations_.erase(it);
}

// Whether an import (of this process or another) still holds the memory
// behind `fd`: its read lock, on an open file description other than
// `fd`'s, conflicts with a write lock.
bool FakeDriver::HeldByImports(int fd) {
  struct flock probe{};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  return fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}

// Frees the released allocations no import holds any more.
void FakeDriver::SweepReleased() {
  std::erase_if(released_, [this](const VmmAllocation& allocation) {
    if (HeldByImports(allocation.fd)) return false;
    devices_[static_cast<size_t>(allocation.device)]->used -= allocation.size;
    close(allocation.fd);
    return true;
  });
}

// A new open file description of what `fd` names (locks taken on it are
// its own), or a duplicate where /proc cannot reopen it.
int FakeDriver::OpenPrivately(int fd) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int reopened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  return reopened >= 0 ? reopened : fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

}  // namespace memd::fake_cuda
