#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "common/ze/driver.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/level_zero/ze_queue.h"

namespace memd::backend {

// A Level Zero GPU as the segments need it.
struct ZeDevice {
  int ordinal = 0;  // memd's "device:N".
  ze::Gpu gpu;
  std::uint64_t alignment = 0;
  std::shared_ptr<ZeQueue> queue;  // For Scrub.
};

/// Device memory from zeMemAllocDevice, exported once through
/// zeMemGetIpcHandle: the 64-byte handle and the dma-buf descriptor inside
/// it (Intel's layout: the descriptor number in the first 8 bytes, then the
/// offset into a pooled block, then the memory type). Owns the allocation,
/// and the descriptor where the driver gave it to memd. Immutable after
/// Create, so thread-safe.
///
/// Who owns the descriptor depends on the driver: newer ones return one
/// cached descriptor per allocation, theirs until zeMemPutIpcHandle or
/// zeMemFree (closing it would break the driver); older ones a fresh one
/// per call, the caller's to close. With a loader that has
/// zeMemPutIpcHandle every handle is put before the free. Without (loader
/// 1.8), Create asks twice and compares: the same descriptor twice is the
/// driver's, two different ones are memd's (the second is closed at once).
///
/// It does not outlive memd (DurableFd is -1, ZeBackend adopts nothing):
/// whether a dma-buf keeps the memory after the process that allocated it
/// died is up to the driver, and not yet measured.
class ZeSegment : public Segment {
 public:
  // Errors: RESOURCE_EXHAUSTED (device out of memory), INTERNAL (a handle
  // with no open descriptor where Intel's layout has it), the driver's
  // with the call, ze_result_t and device.
  static absl::StatusOr<std::unique_ptr<ZeSegment>> Create(
      std::shared_ptr<const ze::Loader> loader, const ZeDevice& device, std::uint64_t bytes);
  ~ZeSegment() override;

  std::uint64_t size() const override { return size_; }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return ExportedHandle{HandleType::kLevelZeroIpc, exported_fd_, handle_};
  }
  // A fill on the device's immediate command list.
  absl::Status Scrub() override;
  absl::StatusOr<SegmentMemory> Memory() const override {
    return SegmentMemory{.device_address = reinterpret_cast<DeviceAddress>(address_),
                         .device = device_.ordinal};
  }

 private:
  ZeSegment(std::shared_ptr<const ze::Loader> loader, ZeDevice device, std::uint64_t size)
      : loader_(std::move(loader)), device_(std::move(device)), size_(size) {}
  absl::Status GetHandles();

  const std::shared_ptr<const ze::Loader> loader_;
  const ZeDevice device_;
  const std::uint64_t size_;
  void* address_ = nullptr;
  std::string handle_;  // The ze_ipc_mem_handle_t's bytes.
  int exported_fd_ = -1;
  UniqueFd owned_fd_;  // exported_fd_ where it is memd's to close.
  // Handles to give back with zeMemPutIpcHandle before the free.
  std::vector<ze_ipc_mem_handle_t> to_put_;
};

// The descriptor number in a handle laid out as Intel's driver lays it out.
int IpcHandleFd(const ze_ipc_mem_handle_t& handle);

}  // namespace memd::backend
