#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ze/driver.h"
#include "daemon/backend/copy_device.h"
#include "daemon/backend/level_zero/ze_copy_device.h"
#include "daemon/backend/level_zero/ze_events.h"
#include "daemon/backend/level_zero/ze_waiter.h"

namespace memd::backend {

/// One immediate command list on a Level Zero GPU's copy group
/// (asynchronous mode: an append returns once queued), its events and its
/// waiter. Owns all three; destroying it waits (up to
/// Options::drain_timeout) for the queued work, stops the waiter, then
/// destroys the list (which waits for what is queued) and the events, or,
/// when the drain gave up on a device that is still healthy, leaves the
/// list and its events to the driver rather than hang. Not thread-safe
/// (one engine thread drives it); WakeWhenDone callbacks run on the
/// waiter's thread. Errors as ZeCopyDevice says.
///
/// A marker is an event that a barrier signals: a barrier with no wait
/// list runs once every command appended before it has completed, which
/// the signal event of the last copy alone would not promise (Level Zero
/// 1.4 has no in-order list flag; commands between barriers may overlap).
class ZeCopyStream : public CopyStream {
 public:
  static absl::StatusOr<std::unique_ptr<ZeCopyStream>> Create(ZeCopyDevice& device,
                                                             std::uint32_t queue);
  ~ZeCopyStream() override;
  ZeCopyStream(const ZeCopyStream&) = delete;
  ZeCopyStream& operator=(const ZeCopyStream&) = delete;

  absl::Status HostToDevice(DeviceAddress destination, const void* source,
                            std::uint64_t bytes) override;
  absl::Status DeviceToHost(void* destination, DeviceAddress source,
                            std::uint64_t bytes) override;
  absl::Status DeviceToDevice(DeviceAddress destination, DeviceAddress source,
                              std::uint64_t bytes) override;
  absl::StatusOr<Marker> Mark() override;
  // zeEventQueryStatus. Errors: INVALID_ARGUMENT for a marker that is not
  // live; else the query's, as a surfaced error (UNAVAILABLE unless
  // sticky).
  absl::StatusOr<bool> Reached(Marker marker) override;
  void Forget(Marker marker) override;
  // A barrier signalling an event the waiter waits for (ze_waiter.h); the
  // callback also runs when that wait fails (a lost device).
  absl::Status WakeWhenDone(std::function<void()> wake) override;
  // A barrier, and a host wait for its event with no timeout.
  absl::Status Synchronize() override;

 private:
  // What a marker number is in: not handed out, handed out, handed out and
  // seen reached (its event can be reused at once when forgotten).
  enum class MarkerState : std::uint8_t { kNone, kLive, kReached };

  ZeCopyStream(ZeCopyDevice& device, ze_command_list_handle_t list)
      : device_(device), api_(device.loader().api()), list_(list), events_(device),
        waiter_(device, events_) {}
  absl::Status Copy(void* destination, const void* source, std::uint64_t bytes,
                    std::string_view direction);
  // An event taken from events_ that a barrier appended now signals.
  absl::StatusOr<std::uint32_t> Barrier();
  // Waits up to Options::drain_timeout for the work queued so far; true
  // when it finished.
  bool Drain();

  ZeCopyDevice& device_;
  const ze::LoaderApi& api_;
  const ze_command_list_handle_t list_;
  ZeEvents events_;
  std::vector<MarkerState> markers_;  // By event number.
  ZeWaiter waiter_;  // After events_: stopped before they go.
};

}  // namespace memd::backend
