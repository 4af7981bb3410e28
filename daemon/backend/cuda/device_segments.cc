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
  MEMD_RETURN_IF_ERROR(driver->Check(
      api.MemAddressReserve(&segment->address_, bytes, device.granularity, 0, 0),
      "cuMemAddressReserve", device.ordinal));
  MEMD_RETURN_IF_ERROR(driver->Check(
      api.MemMap(segment->address_, bytes, 0, segment->handle_, 0), "cuMemMap",
      device.ordinal));
  segment->mapped_ = true;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device.ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  MEMD_RETURN_IF_ERROR(driver->Check(api.MemSetAccess(segment->address_, bytes, &access, 1),
                               "cuMemSetAccess", device.ordinal));
  return segment;
}

VmmSegment::~VmmSegment() {
  const cuda::DriverApi& api = driver_->api();
  if (mapped_) api.MemUnmap(address_, size_);
  if (address_ != 0) api.MemAddressFree(address_, size_);
  // Importers keep the memory alive until they unmap it.
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
