#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda/driver.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/cuda/device_segments.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::backend {

// Which handles the CUDA backend hands out for device memory.
enum class CudaHandles {
  kAuto,  // VMM fds where the device supports them, else legacy IPC.
  kVmmFd,
  kIpc,
};

/// GPU memory through the CUDA driver (loaded at run time): device:N from
/// VMM allocations exported as POSIX fds (or cuMemAlloc with legacy IPC
/// handles), pinned host memory registered with the driver, and host memory
/// as the host backend serves it. Owns the driver reference, the primary
/// contexts it retained and a host backend. Thread-safe.
class CudaBackend : public Backend {
 public:
  // Finds the devices. Errors: FAILED_PRECONDITION when the driver sees no
  // device, or `handles` asks for VMM fds a device cannot export; the
  // driver's errors otherwise.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      std::shared_ptr<const cuda::Driver> driver, CudaHandles handles);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  std::vector<Location> locations() const override;
  std::uint64_t alignment(const Location& location) const override;
  // Errors: INVALID_ARGUMENT (unknown device, bad size), RESOURCE_EXHAUSTED
  // (out of device memory, RLIMIT_MEMLOCK), the driver's errors.
  // Host and pinned memory placed on `numa_node` (MemfdSegment::Create);
  // INVALID_ARGUMENT for device memory with a node. Errors: Reserve's.
  absl::StatusOr<std::unique_ptr<Segment>> ReserveOnNode(const Location& location,
                                                         std::uint64_t bytes,
                                                         int numa_node) override;
  absl::StatusOr<std::unique_ptr<Segment>> Reserve(const Location& location,
                                                   std::uint64_t bytes) override;
  // Host: as the host backend. Pinned: the memfd adopted as the host
  // backend does, registered with the driver as Reserve registers it.
  // Device: the VMM fd imported and mapped on that device (VmmSegment::Adopt).
  // The caller checks that the device is the one the segment was reserved
  // on (its UUID): ordinals can change between boots. Errors:
  // INVALID_ARGUMENT (unknown device, bad size, a descriptor of the wrong
  // kind), FAILED_PRECONDITION (a device that cannot import VMM fds),
  // RESOURCE_EXHAUSTED, the driver's.
  absl::StatusOr<std::unique_ptr<Segment>> Adopt(const Location& location,
                                                 std::uint64_t bytes, UniqueFd fd) override;
  std::vector<DeviceInfo> devices() const override;
  // One CudaCopyDevice per device, by ordinal, in its primary context.
  absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CopyDevices() override;

 private:
  struct Device {
    CudaDevice cuda;
    CUdevice handle = 0;
    DeviceInfo info;
  };

  // The served device at `location` and a size that fits its granularity,
  // or INVALID_ARGUMENT.
  absl::StatusOr<const Device*> DeviceFor(const Location& location,
                                          std::uint64_t bytes) const;

  explicit CudaBackend(std::shared_ptr<const cuda::Driver> driver)
      : driver_(std::move(driver)) {}

  const std::shared_ptr<const cuda::Driver> driver_;
  HostBackend host_;
  std::vector<Device> devices_;
};

}  // namespace memd::backend
