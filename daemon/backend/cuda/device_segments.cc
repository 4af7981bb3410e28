#include "daemon/backend/cuda/device_segments.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/cuda/scoped_context.h"

namespace memd::backend {

// ---- VmmSegment ----

absl::StatusOr<std::unique_ptr<VmmSegment>> VmmSegment::Create(
    std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
    std::uint64_t bytes) {
  const cuda::DriverApi& api = driver->api();
  std::unique_ptr<VmmSegment> segment(new VmmSegment(driver, device, bytes));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device.ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  MEMD_RETURN_IF_ERROR(driver->Check(api.MemCreate(&segment->handle_, bytes, &prop, 0),
                               "cuMemCreate", device.ordinal));
  segment->created_ = true;
  int fd = -1;
  MEMD_RETURN_IF_ERROR(driver->Check(
      api.MemExportToShareableHandle(&fd, segment->handle_,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      "cuMemExportToShareableHandle", device.ordinal));
  segment->fd_.reset(fd);
  MEMD_RETURN_IF_ERROR(segment->MapForDaemon());
  return segment;
}

absl::StatusOr<std::unique_ptr<VmmSegment>> VmmSegment::Adopt(
    std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
    std::uint64_t bytes, UniqueFd fd) {
  const cuda::DriverApi& api = driver->api();
  std::unique_ptr<VmmSegment> segment(new VmmSegment(driver, device, bytes));
  absl::Status imported = driver->Check(
      api.MemImportFromShareableHandle(
          &segment->handle_,
          reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get())),
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
      "cuMemImportFromShareableHandle", device.ordinal);
  // The driver's codes for a descriptor that is not what the record says
  // are its own (on an H200 with driver 580: CUDA_ERROR_UNKNOWN for a memfd,
  // CUDA_ERROR_NOT_SUPPORTED for a mapping past the allocation): the
  // caller's question is whether the descriptor holds the recorded memory,
  // so both come back as INVALID_ARGUMENT, naming the driver's error.
  if (!imported.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(imported.message(), " (descriptor ", fd.get(), ", ", bytes,
                     " bytes): not a VMM allocation this driver knows; memory of a "
                     "driver that was unloaded or reloaded since is gone"));
  }
  segment->created_ = true;  // Released in the destructor from here on.
  const int number = fd.get();
  segment->fd_ = std::move(fd);
  if (absl::Status mapped = segment->MapForDaemon(); !mapped.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(mapped.message(), " (descriptor ", number, ", ", bytes,
                     " bytes): the allocation is not the size recorded"));
  }
  return segment;
}

absl::Status VmmSegment::MapForDaemon() {
  const cuda::DriverApi& api = driver_->api();
  MEMD_RETURN_IF_ERROR(driver_->Check(
      api.MemAddressReserve(&address_, size_, device_.granularity, 0, 0),
      "cuMemAddressReserve", device_.ordinal));
  MEMD_RETURN_IF_ERROR(driver_->Check(api.MemMap(address_, size_, 0, handle_, 0),
                                      "cuMemMap", device_.ordinal));
  mapped_ = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_.ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return driver_->Check(api.MemSetAccess(address_, size_, &access, 1), "cuMemSetAccess",
                        device_.ordinal);
}

VmmSegment::~VmmSegment() {
  const cuda::DriverApi& api = driver_->api();
  if (mapped_) api.MemUnmap(address_, size_);
  if (address_ != 0) api.MemAddressFree(address_, size_);
  // Importers keep the memory alive until they unmap it, and every open
  // descriptor until it is closed (fd_ closes after this body).
  if (created_) api.MemRelease(handle_);
}

absl::Status VmmSegment::Scrub() {
  cuda::ScopedContext context(*driver_, device_.context);
  MEMD_RETURN_IF_ERROR(context.status());
  return driver_->Check(driver_->api().MemsetD8(address_, 0, size_),
                      "cuMemsetD8", device_.ordinal);
}

// ---- IpcSegment ----

absl::StatusOr<std::unique_ptr<IpcSegment>> IpcSegment::Create(
    std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
    std::uint64_t bytes) {
  const cuda::DriverApi& api = driver->api();
  cuda::ScopedContext context(*driver, device.context);
  MEMD_RETURN_IF_ERROR(context.status());
  std::unique_ptr<IpcSegment> segment(new IpcSegment(driver, device, bytes));
  MEMD_RETURN_IF_ERROR(driver->Check(api.MemAlloc(&segment->address_, bytes),
                               "cuMemAlloc", device.ordinal));
  CUipcMemHandle handle{};
  MEMD_RETURN_IF_ERROR(driver->Check(api.IpcGetMemHandle(&handle, segment->address_),
                               "cuIpcGetMemHandle", device.ordinal));
  segment->handle_.assign(handle.reserved, sizeof(handle.reserved));
  return segment;
}

IpcSegment::~IpcSegment() {
  if (address_ == 0) return;
  cuda::ScopedContext context(*driver_, device_.context);
  driver_->api().MemFree(address_);
}

absl::Status IpcSegment::Scrub() {
  return absl::UnimplementedError(
      "a legacy CUDA IPC segment never changes domain: its handle is bytes "
      "that open the allocation for as long as it lives, whoever kept them; "
      "it goes back to the driver instead, and new memory gets a new handle");
}

// ---- PinnedSegment ----

absl::StatusOr<std::unique_ptr<PinnedSegment>> PinnedSegment::Create(
    std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
    std::unique_ptr<MemfdSegment> memory) {
  std::unique_ptr<PinnedSegment> segment(
      new PinnedSegment(driver, device, std::move(memory)));
  const std::uint64_t bytes = segment->memory_->size();
  void* address = segment->memory_->mapping();  // The memfd segment's own.
  segment->address_ = address;
  cuda::ScopedContext context(*driver, device.context);
  MEMD_RETURN_IF_ERROR(context.status());
  absl::Status registered = driver->Check(
      driver->api().MemHostRegister(
          address, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
      "cuMemHostRegister", device.ordinal);
  if (!registered.ok()) {
    // Page-locking is bounded by RLIMIT_MEMLOCK: an operator's knob.
    return absl::Status(registered.code(),
                        absl::StrCat(registered.message(),
                                     "; pinned memory counts against RLIMIT_MEMLOCK "
                                     "(LimitMEMLOCK= in systemd)"));
  }
  segment->registered_ = true;
  return segment;
}

PinnedSegment::~PinnedSegment() {
  if (registered_) {
    cuda::ScopedContext context(*driver_, device_.context);
    driver_->api().MemHostUnregister(address_);
  }
}

absl::Status PinnedSegment::Scrub() {
  std::memset(address_, 0, memory_->size());
  return absl::OkStatus();
}

}  // namespace memd::backend
