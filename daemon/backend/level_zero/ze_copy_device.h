#pragma once

// The copy side of a Level Zero GPU for the transfer engine
// (backend/copy_device.h): staging memory from zeMemAllocHost, and streams
// that are immediate command lists on the device's copy engines
// (ze_copy_stream.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ze/driver.h"
#include "daemon/backend/copy_device.h"
#include "daemon/backend/level_zero/ze_copy_errors.h"
#include "daemon/backend/level_zero/ze_queue.h"
#include "daemon/backend/sticky_health.h"

namespace memd::backend {

/// One Level Zero GPU's copy side, in the context the loader made for its
/// driver. Owns the staging memory it allocated (zeMemFree in the
/// destructor: destroy its streams first) and a reference to the loader.
/// Thread-safe.
///
/// Errors follow ze_copy_errors.h and name the call, the ze_result_t and
/// the device. The first sticky result (ZE_RESULT_ERROR_DEVICE_LOST, or
/// DEVICE_REQUIRES_RESET) any of its streams sees is kept as health() and
/// returned by every later call without asking the driver again.
class ZeCopyDevice : public CopyDevice {
 public:
  struct Options {
    // How long destroying a stream waits for its queued work before it
    // gives up (a hung copy must not hang the daemon's shutdown).
    absl::Duration drain_timeout = absl::Seconds(30);
  };

  // Streams go on the device's copy queue group (CopyQueueGroup: the first
  // copy-only one, else one that also computes). Errors: the driver's;
  // NOT_FOUND when no queue group copies.
  static absl::StatusOr<std::unique_ptr<ZeCopyDevice>> Create(
      std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal,
      Options options);
  static absl::StatusOr<std::unique_ptr<ZeCopyDevice>> Create(
      std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal) {
    return Create(std::move(loader), gpu, ordinal, Options());
  }
  ~ZeCopyDevice() override;
  ZeCopyDevice(const ZeCopyDevice&) = delete;
  ZeCopyDevice& operator=(const ZeCopyDevice&) = delete;

  int ordinal() const override { return ordinal_; }
  // zeMemAllocHost in the driver's context (every GPU of the driver DMAs
  // to and from it), every page written once. Errors: INVALID_ARGUMENT (0
  // bytes), RESOURCE_EXHAUSTED (out of host memory), the driver's.
  absl::StatusOr<std::span<std::byte>> AllocateStaging(std::uint64_t bytes) override;
  // An immediate command list on the copy group; successive streams take
  // the group's queues (engines) in turn. Errors: the driver's.
  absl::StatusOr<std::unique_ptr<CopyStream>> NewStream() override;
  absl::Status health() const override;

  // For the streams: `result` as a status (ze_copy_errors.h), remembering
  // a sticky one as the device's health.
  absl::Status Status(ze_result_t result, std::string_view call, CopyCall kind);
  const ze::Loader& loader() const { return *loader_; }
  const ze::Gpu& gpu() const { return gpu_; }
  const Options& options() const { return options_; }
  const QueueGroup& queue_group() const { return group_; }

 private:
  ZeCopyDevice(std::shared_ptr<const ze::Loader> loader, const ze::Gpu& gpu, int ordinal,
               QueueGroup group, Options options)
      : loader_(std::move(loader)), gpu_(gpu), ordinal_(ordinal), group_(group),
        options_(options) {}

  const std::shared_ptr<const ze::Loader> loader_;
  const ze::Gpu gpu_;
  const int ordinal_;
  const QueueGroup group_;
  const Options options_;
  std::atomic<std::uint32_t> next_queue_{0};
  StickyHealth health_;
  absl::Mutex mu_;
  std::vector<void*> staging_ ABSL_GUARDED_BY(mu_);  // zeMemAllocHost's.
};

}  // namespace memd::backend
