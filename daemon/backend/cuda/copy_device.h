#pragma once

// The copy side of a CUDA GPU for the transfer engine (backend/copy_device.h):
// pinned staging memory from cuMemHostAlloc, and non-blocking streams whose
// markers are pooled events.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cuda/driver.h"
#include "common/numa.h"
#include "daemon/backend/copy_device.h"
#include "daemon/backend/cuda/copy_errors.h"
#include "daemon/backend/sticky_health.h"

namespace memd::backend {

/// One GPU's copy side, in its primary context (borrowed from the backend,
/// which outlives it). Owns the staging memory it allocated (cuMemFreeHost in
/// the destructor: destroy its streams first). Thread-safe.
///
/// Every driver call runs with the primary context current on the calling
/// thread and the one before restored. Its errors follow copy_errors.h; the
/// first sticky CUresult any of its streams sees is kept as health() and
/// returned by every later call without asking the driver again.
class CudaCopyDevice : public CopyDevice {
 public:
  struct Options {
    // How long destroying a stream waits for its queued work before it
    // gives up (a hung copy must not hang the daemon's shutdown).
    absl::Duration drain_timeout = absl::Seconds(30);
    // Where the kernel's NUMA nodes and PCI devices are listed (tests give
    // a tree of their own).
    std::string sysfs_root = "/sys";
  };

  CudaCopyDevice(std::shared_ptr<const cuda::Driver> driver, int ordinal, CUcontext context,
                 Options options);
  CudaCopyDevice(std::shared_ptr<const cuda::Driver> driver, int ordinal, CUcontext context)
      : CudaCopyDevice(std::move(driver), ordinal, context, Options()) {}
  ~CudaCopyDevice() override;
  CudaCopyDevice(const CudaCopyDevice&) = delete;
  CudaCopyDevice& operator=(const CudaCopyDevice&) = delete;

  int ordinal() const override { return ordinal_; }
  // Pinned and PORTABLE, every page written once, and on the GPU's NUMA
  // node where the machine has several and sysfs names the GPU's (pinned
  // memory on the far node halves what a copy moves): then memory placed
  // there (mbind) and registered (cuMemHostRegister, once); else
  // cuMemHostAlloc. Errors: INVALID_ARGUMENT (0 bytes), RESOURCE_EXHAUSTED,
  // the driver's.
  absl::StatusOr<std::span<std::byte>> AllocateStaging(std::uint64_t bytes) override;
  // The node AllocateStaging places memory on; nullopt for none.
  std::optional<int> StagingNode() const;
  // A non-blocking stream at the lowest priority (priorities do not apply
  // to copies). Errors: the driver's.
  absl::StatusOr<std::unique_ptr<CopyStream>> NewStream() override;
  absl::Status health() const override;

  // For CudaCopyStream: `result` as a status (copy_errors.h), remembering a
  // sticky one as the device's health.
  absl::Status Status(CUresult result, std::string_view call, CopyCall kind);
  const cuda::Driver& driver() const { return *driver_; }
  CUcontext context() const { return context_; }
  const Options& options() const { return options_; }

 private:
  const std::shared_ptr<const cuda::Driver> driver_;
  const int ordinal_;
  const CUcontext context_;
  const Options options_;
  StickyHealth health_;
  absl::Mutex mu_;
  std::vector<void*> staging_ ABSL_GUARDED_BY(mu_);  // cuMemHostAlloc's.
  std::vector<numa::NodeMemory> registered_ ABSL_GUARDED_BY(mu_);  // On a node.
};

/// A non-blocking CUDA stream and its pool of events (markers). Owns both;
/// destroying it waits (up to Options::drain_timeout) for the queued work,
/// then destroys them. Not thread-safe (one engine thread drives it); the
/// WakeWhenDone callbacks run on the driver's thread. Errors as
/// CudaCopyDevice says.
///
/// After the context broke the driver calls no host function again, so a
/// pending WakeWhenDone never fires: a caller that waits for one also
/// watches Reached() or health().
class CudaCopyStream : public CopyStream {
 public:
  static absl::StatusOr<std::unique_ptr<CudaCopyStream>> Create(CudaCopyDevice& device);
  ~CudaCopyStream() override;
  CudaCopyStream(const CudaCopyStream&) = delete;
  CudaCopyStream& operator=(const CudaCopyStream&) = delete;

  absl::Status HostToDevice(DeviceAddress destination, const void* source,
                            std::uint64_t bytes) override;
  absl::Status DeviceToHost(void* destination, DeviceAddress source,
                            std::uint64_t bytes) override;
  absl::Status DeviceToDevice(DeviceAddress destination, DeviceAddress source,
                              std::uint64_t bytes) override;
  absl::StatusOr<Marker> Mark() override;
  // Errors: INVALID_ARGUMENT for a marker that is not live; else the
  // event's, as a surfaced error (UNAVAILABLE unless sticky or invalid).
  absl::StatusOr<bool> Reached(Marker marker) override;
  void Forget(Marker marker) override;
  absl::Status WakeWhenDone(std::function<void()> wake) override;
  absl::Status Synchronize() override;

  // The wakes queued and not run yet; shared with each wake, which may run
  // on the driver's thread after the stream is gone (cuStreamDestroy lets
  // queued work finish).
  struct PendingWakes;

 private:
  CudaCopyStream(CudaCopyDevice& device, CUstream stream, CUstream notify,
                 CUevent notify_event);
  // The device's health when it is broken; OK otherwise.
  absl::Status Broken() const;
  // Waits up to Options::drain_timeout for the work queued so far.
  void Drain();

  CudaCopyDevice& device_;
  const cuda::DriverApi& api_;
  const CUstream stream_;
  // WakeWhenDone's host functions run on this second stream, behind an
  // event of stream_: a host function blocks the work queued after it in
  // its stream, and on stream_ every chunk's copy would wait for the
  // previous chunk's wake (a bubble per chunk on the link).
  const CUstream notify_;
  const CUevent notify_event_;
  std::vector<CUevent> events_;  // By marker; created on demand, reused.
  std::vector<bool> live_;       // Marker handed out and not forgotten.
  std::vector<Marker> free_;     // Created events not in use.
  std::shared_ptr<PendingWakes> wakes_;
};

}  // namespace memd::backend
