#pragma once

// What the transfer engine needs from a GPU backend: where a segment's bytes
// are, pinned staging memory, and in-order queues of asynchronous copies.
// Plain C++: no driver type crosses this header, so the engine (transfer/)
// is tested against fakes and never includes cuda.h or ze_api.h.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::backend {

// A GPU virtual address in the daemon's context on one device.
using DeviceAddress = std::uint64_t;

// Where the daemon itself reaches a segment's bytes (Segment::Memory).
struct SegmentMemory {
  // Host and pinned memory: the daemon's own mapping; nullptr for device
  // memory.
  std::byte* host = nullptr;
  // Device memory: the address in the daemon's context on `device`.
  DeviceAddress device_address = 0;
  // The GPU ordinal (the backend's numbering); -1 for host memory.
  int device = -1;
  // Host memory the driver can DMA from and to directly (registered, page
  // locked): the engine copies it with no staging.
  bool registered = false;

  bool on_device() const { return device >= 0; }
  // The same memory, `offset` bytes further in.
  SegmentMemory At(std::uint64_t offset) const {
    SegmentMemory moved = *this;
    if (on_device()) {
      moved.device_address += offset;
    } else {
      moved.host += offset;
    }
    return moved;
  }
};

// Names one recorded point in a CopyStream (a pooled CUDA or Level Zero
// event).
using Marker = std::uint32_t;

/// One in-order queue of asynchronous copies on a GPU (a non-blocking CUDA
/// stream, an immediate Level Zero command list), and markers that tell when
/// the copies enqueued before them have finished. Owns the queue and its
/// events; destroying it waits for what was enqueued and then frees them.
/// Not thread-safe: the engine drives each stream from one thread
/// (WakeWhenDone's callback runs on a driver or backend thread).
///
/// Errors name the driver call, its result (CUresult, ze_result_t) and the
/// device. Their codes say what the caller may do: UNAVAILABLE for failures
/// worth retrying (the driver out of memory or resources, a transient error
/// surfaced by an event), INVALID_ARGUMENT for bad addresses or sizes (a
/// bug: never retried), INTERNAL for the rest. After a sticky error (the
/// context or device is broken until the process restarts) every call fails
/// and the device's health() says so.
class CopyStream {
 public:
  virtual ~CopyStream() = default;

  // Enqueue a copy of `bytes` and return at once; the bytes land later, in
  // enqueue order. Host pointers that are not registered (pinned) memory may
  // make the driver copy synchronously: the engine stages those.
  virtual absl::Status HostToDevice(DeviceAddress destination, const void* source,
                                    std::uint64_t bytes) = 0;
  virtual absl::Status DeviceToHost(void* destination, DeviceAddress source,
                                    std::uint64_t bytes) = 0;
  // Both addresses on this stream's device.
  virtual absl::Status DeviceToDevice(DeviceAddress destination, DeviceAddress source,
                                      std::uint64_t bytes) = 0;

  // A marker behind everything enqueued so far (cuEventRecord; a barrier
  // that signals an event).
  virtual absl::StatusOr<Marker> Mark() = 0;
  // True once the work before `marker` has finished, false while it runs;
  // an error the work ended with. Valid until Forget(marker).
  virtual absl::StatusOr<bool> Reached(Marker marker) = 0;
  // Returns the marker's event to the stream's pool.
  virtual void Forget(Marker marker) = 0;

  // Calls `wake` once the work enqueued so far has finished (cuLaunchHostFunc;
  // a thread that waits for an event): from a driver or backend thread, so
  // it must neither block nor call the driver.
  virtual absl::Status WakeWhenDone(std::function<void()> wake) = 0;

  // Blocks until everything enqueued has finished.
  virtual absl::Status Synchronize() = 0;
};

/// The copy side of one GPU: pinned staging memory and copy streams.
/// Thread-safe. Owns the staging memory it allocated (freed with it: destroy
/// streams first).
class CopyDevice {
 public:
  virtual ~CopyDevice() = default;

  // The backend's ordinal of the GPU ("device:N").
  virtual int ordinal() const = 0;

  // `bytes` of page-locked host memory the device DMAs to and from directly
  // (cuMemHostAlloc, portable; zeMemAllocHost), allocated once, every page
  // touched. Valid as long as this object. Errors: RESOURCE_EXHAUSTED, the
  // driver's.
  virtual absl::StatusOr<std::span<std::byte>> AllocateStaging(std::uint64_t bytes) = 0;

  // A new non-blocking stream. Errors: the driver's.
  virtual absl::StatusOr<std::unique_ptr<CopyStream>> NewStream() = 0;

  // OK, or the sticky error that broke the device's context (every later
  // driver call on it fails until the daemon restarts).
  virtual absl::Status health() const = 0;
};

}  // namespace memd::backend
