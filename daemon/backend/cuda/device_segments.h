#pragma once

// The segments the CUDA backend hands out: device memory as a VMM
// allocation exported as a POSIX fd, device memory from cuMemAlloc shared
// through a legacy IPC handle, and pinned host memory (a memfd registered
// with the driver).

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/cuda/driver.h"
#include "common/unique_fd.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/host/memfd_segment.h"

namespace memd::backend {

// A device and its primary context, as the segments need it.
struct CudaDevice {
  int ordinal = 0;
  CUcontext context = nullptr;
  std::uint64_t granularity = 0;
};

/// Device memory from cuMemCreate, exported once as a POSIX fd. The daemon
/// maps it too (reserve, map, set access), to scrub it. Owns the allocation,
/// the fd and the mapping. Immutable after Create, so thread-safe.
class VmmSegment : public Segment {
 public:
  // Errors: RESOURCE_EXHAUSTED (device out of memory), others from the
  // driver with the call, CUresult and device.
  static absl::StatusOr<std::unique_ptr<VmmSegment>> Create(
      std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
      std::uint64_t bytes);
  ~VmmSegment() override;

  std::uint64_t size() const override { return size_; }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return ExportedHandle{HandleType::kCudaVmmFd, fd_.get(), {}};
  }
  absl::Status Scrub() override;
  // The daemon's own mapping of the allocation, on the segment's device.
  absl::StatusOr<SegmentMemory> Memory() const override {
    return SegmentMemory{.device_address = address_, .device = device_.ordinal};
  }

 private:
  VmmSegment(std::shared_ptr<const cuda::Driver> driver, CudaDevice device,
             std::uint64_t size)
      : driver_(std::move(driver)), device_(device), size_(size) {}

  const std::shared_ptr<const cuda::Driver> driver_;
  const CudaDevice device_;
  const std::uint64_t size_;
  CUmemGenericAllocationHandle handle_ = 0;
  bool created_ = false;
  CUdeviceptr address_ = 0;  // Reserved range; mapped when mapped_.
  bool mapped_ = false;
  UniqueFd fd_;
};

/// Device memory from cuMemAlloc with its legacy IPC handle, for devices or
/// clients without VMM fd export. Owns the allocation. Thread-safe.
///
/// The handle is bytes (ExportedHandle::replayable): anyone who ever held
/// them may open the allocation for as long as it lives, so it never
/// changes domain (Scrub is UNIMPLEMENTED: the pool frees it instead, and
/// cuIpcGetMemHandle gives new memory a new handle).
class IpcSegment : public Segment {
 public:
  static absl::StatusOr<std::unique_ptr<IpcSegment>> Create(
      std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
      std::uint64_t bytes);
  ~IpcSegment() override;

  std::uint64_t size() const override { return size_; }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return ExportedHandle{HandleType::kCudaIpc, -1, handle_};
  }
  // UNIMPLEMENTED, always (see the class comment).
  absl::Status Scrub() override;
  // The cuMemAlloc address, in the daemon's context on the segment's device.
  absl::StatusOr<SegmentMemory> Memory() const override {
    return SegmentMemory{.device_address = address_, .device = device_.ordinal};
  }

 private:
  IpcSegment(std::shared_ptr<const cuda::Driver> driver, CudaDevice device,
             std::uint64_t size)
      : driver_(std::move(driver)), device_(device), size_(size) {}

  const std::shared_ptr<const cuda::Driver> driver_;
  const CudaDevice device_;
  const std::uint64_t size_;
  CUdeviceptr address_ = 0;
  std::string handle_;  // The CUipcMemHandle's bytes.
};

/// Pinned staging memory: a host memfd segment whose daemon mapping is
/// registered with the driver (portable, device-mapped), so that transfers
/// can DMA from it and clients fill it without pinning anything. Owns the
/// memfd segment (and with it the mapping) and the registration.
/// Thread-safe.
class PinnedSegment : public Segment {
 public:
  static absl::StatusOr<std::unique_ptr<PinnedSegment>> Create(
      std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
      std::unique_ptr<MemfdSegment> memory);
  ~PinnedSegment() override;

  std::uint64_t size() const override { return memory_->size(); }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return memory_->Export(access);
  }
  absl::Status Scrub() override;
  // The pages go; the driver's registration of them ends with the segment.
  void Discard() override { memory_->Discard(); }
  // The registered mapping: the engine DMAs to and from it directly.
  absl::StatusOr<SegmentMemory> Memory() const override {
    return SegmentMemory{.host = static_cast<std::byte*>(address_), .registered = true};
  }

 private:
  PinnedSegment(std::shared_ptr<const cuda::Driver> driver, CudaDevice device,
                std::unique_ptr<MemfdSegment> memory)
      : driver_(std::move(driver)), device_(device), memory_(std::move(memory)) {}

  const std::shared_ptr<const cuda::Driver> driver_;
  const CudaDevice device_;
  const std::unique_ptr<MemfdSegment> memory_;
  void* address_ = nullptr;
  bool registered_ = false;
};

}  // namespace memd::backend
