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

/// Device memory from cuMemCreate, exported once as a POSIX fd; or such
/// memory an earlier memd made, imported from that fd (Adopt). The daemon
/// maps it too (reserve, map, set access), to scrub it. Owns the allocation
/// handle, the fd and the mapping: the memory goes back when the segment is
/// destroyed and the last descriptor anywhere is closed. Immutable after
/// Create/Adopt, so thread-safe.
class VmmSegment : public Segment {
 public:
  // Errors: RESOURCE_EXHAUSTED (device out of memory), others from the
  // driver with the call, CUresult and device.
  static absl::StatusOr<std::unique_ptr<VmmSegment>> Create(
      std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
      std::uint64_t bytes);
  // Imports the allocation `fd` names (cuMemImportFromShareableHandle) and
  // maps `bytes` of it on `device`, as Create does. Keeps `fd`: the driver
  // refuses to export imported memory again, so Export hands out this one.
  // The driver answers no question about an allocation's size: a `bytes`
  // larger than the allocation fails at cuMemMap, a smaller one is not
  // seen (the caller's durable record is the check). Errors:
  // INVALID_ARGUMENT when the import or the mapping fails (the descriptor
  // is not the recorded memory; the message names the driver's error and
  // says that memory of an unloaded or reloaded driver is gone); the
  // driver's, with the call and device, for setting access.
  static absl::StatusOr<std::unique_ptr<VmmSegment>> Adopt(
      std::shared_ptr<const cuda::Driver> driver, const CudaDevice& device,
      std::uint64_t bytes, UniqueFd fd);
  ~VmmSegment() override;

  std::uint64_t size() const override { return size_; }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return ExportedHandle{HandleType::kCudaVmmFd, fd_.get(), {}};
  }
  // The exported (or adopted) fd: it keeps the allocation alive.
  int DurableFd() const override { return fd_.get(); }
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
  bool created_ = false;  // handle_ is ours to release (created or imported).
  CUdeviceptr address_ = 0;  // Reserved range; mapped when mapped_.
  bool mapped_ = false;
  UniqueFd fd_;

  // Reserves an address range, maps the allocation and grants the device
  // read-write access: the daemon's own mapping.
  absl::Status MapForDaemon();
};

/// Device memory from cuMemAlloc with its legacy IPC handle, for devices or
/// clients without VMM fd export. Owns the allocation. Thread-safe.
///
/// The handle is bytes (ExportedHandle::replayable): anyone who ever held
/// them may open the allocation for as long as it lives, so it never
/// changes domain (Scrub is UNIMPLEMENTED: the pool frees it instead, and
/// cuIpcGetMemHandle gives new memory a new handle).
///
/// It cannot outlive memd (DurableFd is -1): cuMemAlloc memory is freed with
/// the process that allocated it, and its handle is bytes, not a reference
/// that would keep it.
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
  // The memfd's: the registration is memd's own and is made again on
  // adoption (CudaBackend::Adopt).
  int DurableFd() const override { return memory_->DurableFd(); }
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
