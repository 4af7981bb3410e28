#include "daemon/backend/cuda/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "common/cuda/scoped_context.h"
#include "daemon/backend/cuda/copy_device.h"

namespace memd::backend {

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    std::shared_ptr<const cuda::Driver> driver, CudaHandles handles) {
  const cuda::DriverApi& api = driver->api();
  int count = 0;
  MEMD_RETURN_IF_ERROR(driver->Check(api.DeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver ", driver->path(), " sees no device"));
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(driver));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Device device;
    device.cuda.ordinal = ordinal;
    device.info.ordinal = ordinal;
    MEMD_RETURN_IF_ERROR(driver->Check(api.DeviceGet(&device.handle, ordinal), "cuDeviceGet",
                                  ordinal));
    char name[256] = {};
    MEMD_RETURN_IF_ERROR(driver->Check(api.DeviceGetName(name, sizeof(name) - 1, device.handle),
                                  "cuDeviceGetName", ordinal));
    device.info.name = name;
    MEMD_ASSIGN_OR_RETURN(device.info.uuid, driver->DeviceUuid(ordinal));
    size_t total = 0;
    MEMD_RETURN_IF_ERROR(driver->Check(api.DeviceTotalMem(&total, device.handle),
                                  "cuDeviceTotalMem", ordinal));
    device.info.total_bytes = total;
    int vmm = 0, posix_fd = 0;
    MEMD_RETURN_IF_ERROR(driver->Check(
        api.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                               device.handle),
        "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)", ordinal));
    MEMD_RETURN_IF_ERROR(driver->Check(
        api.DeviceGetAttribute(
            &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
            device.handle),
        "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)", ordinal));
    device.info.vmm = vmm != 0;
    device.info.posix_fd = posix_fd != 0;
    const bool fds = device.info.vmm && device.info.posix_fd;
    if (handles == CudaHandles::kVmmFd && !fds) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", ordinal, " (", device.info.name,
          ") cannot export VMM memory as POSIX fds; use cuda_handles = auto or ipc"));
    }
    device.info.handle_type = (handles == CudaHandles::kIpc || !fds)
                                  ? HandleType::kCudaIpc
                                  : HandleType::kCudaVmmFd;
    MEMD_RETURN_IF_ERROR(driver->Check(
        api.DevicePrimaryCtxRetain(&device.cuda.context, device.handle),
        "cuDevicePrimaryCtxRetain", ordinal));
    backend->devices_.push_back(device);  // Released in the destructor from here on.
    std::uint64_t granularity = 2 << 20;
    if (fds) {
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = ordinal;
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      size_t recommended = 0;
      MEMD_RETURN_IF_ERROR(driver->Check(
          api.MemGetAllocationGranularity(&recommended, &prop,
                                          CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity", ordinal));
      granularity = recommended;
    }
    // Sub-allocations keep the granularity too, for IPC segments as well:
    // a buffer's offset stays aligned the way the driver aligns allocations.
    backend->devices_.back().cuda.granularity = granularity;
  }
  return backend;
}

CudaBackend::~CudaBackend() {
  for (const Device& device : devices_) {
    driver_->api().DevicePrimaryCtxRelease(device.handle);
  }
}

std::vector<Location> CudaBackend::locations() const {
  std::vector<Location> locations = {Location::Host(), Location::Pinned()};
  for (const Device& device : devices_) {
    locations.push_back(Location::Device(device.cuda.ordinal));
  }
  return locations;
}

std::uint64_t CudaBackend::alignment(const Location& location) const {
  if (location.kind == Location::Kind::kDevice && location.device >= 0 &&
      location.device < static_cast<int>(devices_.size())) {
    return devices_[location.device].cuda.granularity;
  }
  return host_.alignment(Location::Host());
}

absl::StatusOr<std::unique_ptr<Segment>> CudaBackend::Reserve(const Location& location,
                                                             std::uint64_t bytes) {
  return ReserveOnNode(location, bytes, -1);
}

absl::StatusOr<std::unique_ptr<Segment>> CudaBackend::ReserveOnNode(const Location& location,
                                                                   std::uint64_t bytes,
                                                                   int numa_node) {
  if (location.kind == Location::Kind::kHost) {
    return host_.ReserveOnNode(location, bytes, numa_node);
  }
  if (location.kind == Location::Kind::kPinned) {
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<MemfdSegment> memory,
                          MemfdSegment::Create(bytes, /*pin=*/false, numa_node));
    // Registered with the first device's context; PORTABLE makes the
    // registration good for every context.
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<PinnedSegment> pinned,
                     PinnedSegment::Create(driver_, devices_.front().cuda, std::move(memory)));
    return std::unique_ptr<Segment>(std::move(pinned));
  }
  if (numa_node >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device memory is not placed on a NUMA node (asked ", location.ToString(),
        " on node ", numa_node, ")"));
  }
  MEMD_ASSIGN_OR_RETURN(const Device* found, DeviceFor(location, bytes));
  const Device& device = *found;
  if (device.info.handle_type == HandleType::kCudaVmmFd) {
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<VmmSegment> segment,
                     VmmSegment::Create(driver_, device.cuda, bytes));
    return std::unique_ptr<Segment>(std::move(segment));
  }
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<IpcSegment> segment,
                   IpcSegment::Create(driver_, device.cuda, bytes));
  return std::unique_ptr<Segment>(std::move(segment));
}

absl::StatusOr<const CudaBackend::Device*> CudaBackend::DeviceFor(
    const Location& location, std::uint64_t bytes) const {
  if (location.device < 0 || location.device >= static_cast<int>(devices_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no CUDA device ", location.device, " (this node has ", devices_.size(), ")"));
  }
  const Device& device = devices_[location.device];
  if (bytes == 0 || bytes % device.cuda.granularity != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment size ", bytes, " is not a positive multiple of device ",
        location.device, "'s granularity ", device.cuda.granularity));
  }
  return &device;
}

absl::StatusOr<std::unique_ptr<Segment>> CudaBackend::Adopt(const Location& location,
                                                            std::uint64_t bytes,
                                                            UniqueFd fd) {
  if (location.kind == Location::Kind::kHost) {
    return host_.Adopt(location, bytes, std::move(fd));
  }
  if (location.kind == Location::Kind::kPinned) {
    if (bytes == 0 || bytes % host_.alignment(location) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment size ", bytes, " is not a positive multiple of the page size ",
          host_.alignment(location)));
    }
    // Unlocked, as Reserve makes it: the registration pins it.
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<MemfdSegment> memory,
                          MemfdSegment::Adopt(std::move(fd), bytes, /*pin=*/false));
    MEMD_ASSIGN_OR_RETURN(std::unique_ptr<PinnedSegment> pinned,
                          PinnedSegment::Create(driver_, devices_.front().cuda,
                                                std::move(memory)));
    return std::unique_ptr<Segment>(std::move(pinned));
  }
  MEMD_ASSIGN_OR_RETURN(const Device* device, DeviceFor(location, bytes));
  if (!device->info.vmm || !device->info.posix_fd) {
    // Whatever the descriptor is, this device cannot import it; and legacy
    // IPC segments never outlive memd (IpcSegment).
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", location.device, " (", device->info.name,
        ") cannot import VMM memory from POSIX fds, so it cannot adopt a segment"));
  }
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<VmmSegment> segment,
                        VmmSegment::Adopt(driver_, device->cuda, bytes, std::move(fd)));
  return std::unique_ptr<Segment>(std::move(segment));
}

std::vector<DeviceInfo> CudaBackend::devices() const {
  std::vector<DeviceInfo> infos;
  for (const Device& device : devices_) {
    DeviceInfo info = device.info;
    cuda::ScopedContext context(*driver_, device.cuda.context);
    size_t free = 0, total = 0;
    if (context.status().ok() &&
        driver_->api().MemGetInfo(&free, &total) == CUDA_SUCCESS) {
      info.free_bytes = free;
      info.has_free = true;
    }
    infos.push_back(info);
  }
  return infos;
}

absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CudaBackend::CopyDevices() {
  std::vector<std::unique_ptr<CopyDevice>> copy_devices;
  for (const Device& device : devices_) {
    copy_devices.push_back(
        std::make_unique<CudaCopyDevice>(driver_, device.cuda.ordinal, device.cuda.context));
  }
  return copy_devices;
}

}  // namespace memd::backend
