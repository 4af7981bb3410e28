#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ze/driver.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/host/host_backend.h"
#include "daemon/backend/level_zero/ze_segment.h"

namespace memd::backend {

/// GPU memory through Level Zero (the loader loaded at run time): device:N
/// from zeMemAllocDevice, exported as IPC handles, and host and pinned
/// memory as the host backend serves them. Numbers its GPUs from
/// `first_ordinal` (the daemon puts CUDA GPUs first). Owns the loader
/// reference, a queue per GPU and a host backend; the copy devices it makes
/// (ze_copy_device.h) are the caller's. Thread-safe.
class ZeBackend : public Backend {
 public:
  // Serves every GPU of `loader` that can pass memory between processes.
  // Errors: FAILED_PRECONDITION when there is none (and why); the
  // driver's.
  static absl::StatusOr<std::unique_ptr<ZeBackend>> Create(
      std::shared_ptr<const ze::Loader> loader, int first_ordinal = 0);

  std::string_view name() const override { return "level_zero"; }
  std::vector<Location> locations() const override;
  std::uint64_t alignment(const Location& location) const override;
  // Errors: INVALID_ARGUMENT (not one of its devices, bad size),
  // RESOURCE_EXHAUSTED (out of device memory), the driver's.
  // Host and pinned memory placed on `numa_node` (MemfdSegment::Create);
  // INVALID_ARGUMENT for device memory with a node. Errors: Reserve's.
  absl::StatusOr<std::unique_ptr<Segment>> ReserveOnNode(const Location& location,
                                                         std::uint64_t bytes,
                                                         int numa_node) override;
  absl::StatusOr<std::unique_ptr<Segment>> Reserve(const Location& location,
                                                   std::uint64_t bytes) override;
  std::vector<DeviceInfo> devices() const override;
  // A ZeCopyDevice per GPU, numbered as devices() numbers them. Errors:
  // the driver's.
  absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CopyDevices() override;

  int first_ordinal() const { return first_ordinal_; }
  int device_count() const { return static_cast<int>(devices_.size()); }

 private:
  ZeBackend(std::shared_ptr<const ze::Loader> loader, int first_ordinal)
      : loader_(std::move(loader)), first_ordinal_(first_ordinal) {}
  const ZeDevice* Find(int ordinal) const;

  const std::shared_ptr<const ze::Loader> loader_;
  const int first_ordinal_;
  HostBackend host_;
  std::vector<ZeDevice> devices_;
};

}  // namespace memd::backend
