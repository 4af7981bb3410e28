#pragma once

// A FAKE CopyDevice for the transfer engine's tests: "device memory" is host
// memory (a SegmentMemory with device = N and device_address = the host
// pointer's value), each stream runs its copies in order on a thread of its
// own, and a modelled link (bandwidth and per-operation latency, one copy
// at a time per direction per device, taken in the order they became ready
// at the head of their streams, as a GPU's copy engine takes them) makes
// copies finish later, as a GPU's do. The link's time is a Clock's: the
// real one by default, or a test's FakeClock, on which a copy lands only
// when the test has moved the clock past its modelled end (nothing
// sleeps). The schedule is computed from modelled times (when a copy was
// queued, when the copy before it on its stream and on the wire ended),
// never from when a thread got somewhere, and a copy takes the wire only
// once the clock has reached its start: on a fake clock it is the same
// however the threads run. Faults are injected per device: an error at
// enqueue, an error surfaced at a marker, a sticky error, copies that
// never complete.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/copy_device.h"

namespace memd::test {

struct FakeLink {
  double gbps = 8;  // Bytes per nanosecond, per direction.
  absl::Duration latency = absl::Microseconds(5);
};

// What tests steer and read; shared by a FakeCopyDevice and its streams, so
// a test keeps it after handing the device to the engine. Borrows `clock`
// (it must outlive the streams). Thread-safe.
class FakeDeviceState {
 public:
  explicit FakeDeviceState(FakeLink link, const Clock& clock = RealClock::Default())
      : link_(link), clock_(clock) {}

  // The next `count` enqueue calls (HostToDevice, DeviceToHost,
  // DeviceToDevice) return `error` and queue nothing.
  void FailEnqueues(int count, absl::Status error);
  // The next `count` copies end with `error`, surfaced by the next marker.
  void FailCopies(int count, absl::Status error);
  // From now on every call fails with `error` and health() returns it.
  void BreakSticky(absl::Status error);
  // BreakSticky(error) right after the `count`-th copy enqueued from now is
  // queued: that copy stays on its stream and the marker recorded behind it
  // fails, as when a GPU breaks between a cuMemcpyAsync and its
  // cuEventRecord (a window a test otherwise hits only under load).
  void BreakStickyAfterEnqueues(int count, absl::Status error);
  // Copies that start from now on never finish (until Release or the
  // stream's destruction).
  void Hang();
  void Release();
  void SetLink(FakeLink link);
  // Called at every enqueue that queues a copy, on the enqueuing thread
  // (the engine's lane) before the copy is queued: what a test observes of
  // the order of the lane's steps. Set before the engine starts.
  using EnqueueHook =
      std::function<void(const void* destination, const void* source, std::uint64_t bytes)>;
  void OnEnqueue(EnqueueHook hook);

  // Copies whose source bytes changed between enqueue and the DMA (a
  // staging slot reused too early).
  int reused_too_early() const;
  // The most copies ever queued and unfinished on one stream at once.
  int max_queued() const;
  // The most unfinished copies a copy of `bytes` bytes ever found ahead of
  // it on its stream when it was queued (0 if none was ever queued).
  int most_queued_ahead(std::uint64_t bytes) const;
  // Copies of `bytes` bytes queued so far: how a test knows that a copy is
  // on the device before it moves the link's clock.
  int queued_of(std::uint64_t bytes) const;
  std::uint64_t copies() const;
  const Clock& clock() const { return clock_; }

 private:
  friend class FakeCopyDevice;
  friend class FakeCopyStream;

  absl::Status TakeEnqueueFault();
  absl::Status TakeCopyFault();
  // A copy was queued (BreakStickyAfterEnqueues counts it).
  void NoteEnqueued();
  absl::Status sticky() const;
  void NoteQueued(std::uint64_t bytes, int queued);
  // The link's schedule. A stream is a number; a queued copy a ticket.
  int NewStream();
  // The copy is queued on `stream` (at `queued`, in the link's clock).
  std::uint64_t Queue(int stream, int wire, std::uint64_t bytes, absl::Time queued);
  // Waits until the copy, the next of its stream, takes its wire, and
  // returns when it ends in the modelled time. Of the copies at the head
  // of their streams, the wire takes the one ready first (queued, and its
  // stream's copy before it ended), the earliest queued on a tie, once the
  // wire is free and the clock has reached that start; it takes latency +
  // bytes / bandwidth. The wire is the copy's until GiveWire. nullopt when
  // `stop` was raised first (the copy is forgotten).
  std::optional<absl::Time> AwaitTurn(int wire, std::uint64_t ticket,
                                      const std::atomic<bool>& stop);
  void GiveWire(int wire);
  // The stream is going: its copies never run, and keep no other off the wire.
  void ForgetStream(int stream);
  void NoteCopy(bool reused);
  // Blocks while hung; false when `stop` was raised first.
  bool WaitWhileHung(const std::atomic<bool>& stop);

  mutable std::mutex mu_;
  std::condition_variable released_;
  FakeLink link_;
  int enqueue_faults_ = 0;
  absl::Status enqueue_error_;
  int copy_faults_ = 0;
  absl::Status copy_error_;
  absl::Status sticky_;
  int sticky_after_enqueues_ = 0;  // 0: none armed.
  absl::Status sticky_after_error_;
  bool hung_ = false;
  int reused_too_early_ = 0;
  int max_queued_ = 0;
  std::map<std::uint64_t, int> queued_ahead_;  // By copy size.
  std::map<std::uint64_t, int> queued_of_;     // By copy size.
  std::uint64_t copies_ = 0;
  EnqueueHook on_enqueue_;
  // The modelled link: one copy at a time per direction (wire).
  struct Queued {
    int stream = 0;
    int wire = 0;
    std::uint64_t bytes = 0;
    absl::Time queued;
  };
  // When a queued copy is ready: queued, and its stream's copy before ended.
  absl::Time ReadyLocked(const Queued& copy) const;
  std::condition_variable wire_turn_;
  int next_stream_ = 0;
  std::uint64_t next_ticket_ = 0;
  std::map<std::uint64_t, Queued> queued_copies_;  // Not yet on a wire, by ticket.
  std::map<int, std::deque<std::uint64_t>> stream_copies_;  // Their tickets, per stream.
  std::map<int, absl::Time> stream_end_;  // The end of each stream's last copy on a wire.
  bool wire_busy_[3] = {};
  absl::Time wire_free_[3] = {absl::InfinitePast(), absl::InfinitePast(), absl::InfinitePast()};
  const Clock& clock_;
};

class FakeCopyDevice : public backend::CopyDevice {
 public:
  FakeCopyDevice(int ordinal, std::shared_ptr<FakeDeviceState> state)
      : ordinal_(ordinal), state_(std::move(state)) {}

  int ordinal() const override { return ordinal_; }
  absl::StatusOr<std::span<std::byte>> AllocateStaging(std::uint64_t bytes) override;
  absl::StatusOr<std::unique_ptr<backend::CopyStream>> NewStream() override;
  absl::Status health() const override { return state_->sticky(); }

  // The staging memory handed out, for tests that recognise it.
  bool IsStaging(const void* pointer) const;

 private:
  const int ordinal_;
  std::shared_ptr<FakeDeviceState> state_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<std::byte[]>> staging_;
  std::vector<std::span<std::byte>> spans_;
};

// Device memory for the fake: host bytes named by their address.
backend::SegmentMemory FakeDeviceMemory(int device, std::byte* bytes);

}  // namespace memd::test
