#include "tests/daemon/transfer/fake_copy_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace memd::test {
namespace {

std::uint64_t Checksum(const std::byte* bytes, std::uint64_t length) {
  std::uint64_t hash = 1469598103934665603ull;
  for (std::uint64_t i = 0; i < length; i += 64) {  // One byte per cache line: cheap.
    hash = (hash ^ static_cast<std::uint64_t>(bytes[i])) * 1099511628211ull;
  }
  if (length > 0) hash = (hash ^ static_cast<std::uint64_t>(bytes[length - 1])) * 31;
  return hash;
}

constexpr std::byte kPoison{0xDD};

}  // namespace

void FakeDeviceState::FailEnqueues(int count, absl::Status error) {
  std::lock_guard lock(mu_);
  enqueue_faults_ = count;
  enqueue_error_ = std::move(error);
}
void FakeDeviceState::OnEnqueue(EnqueueHook hook) {
  std::lock_guard lock(mu_);
  on_enqueue_ = std::move(hook);
}
void FakeDeviceState::FailCopies(int count, absl::Status error) {
  std::lock_guard lock(mu_);
  copy_faults_ = count;
  copy_error_ = std::move(error);
}
void FakeDeviceState::BreakSticky(absl::Status error) {
  std::lock_guard lock(mu_);
  sticky_ = std::move(error);
}
void FakeDeviceState::BreakStickyAfterEnqueues(int count, absl::Status error) {
  std::lock_guard lock(mu_);
  sticky_after_enqueues_ = count;
  sticky_after_error_ = std::move(error);
}
void FakeDeviceState::NoteEnqueued() {
  std::lock_guard lock(mu_);
  if (sticky_after_enqueues_ > 0 && --sticky_after_enqueues_ == 0) sticky_ = sticky_after_error_;
}
void FakeDeviceState::Hang() {
  std::lock_guard lock(mu_);
  hung_ = true;
}
void FakeDeviceState::Release() {
  std::lock_guard lock(mu_);
  hung_ = false;
  released_.notify_all();
}
void FakeDeviceState::SetLink(FakeLink link) {
  std::lock_guard lock(mu_);
  link_ = link;
}
int FakeDeviceState::reused_too_early() const {
  std::lock_guard lock(mu_);
  return reused_too_early_;
}
int FakeDeviceState::max_queued() const {
  std::lock_guard lock(mu_);
  return max_queued_;
}
std::uint64_t FakeDeviceState::copies() const {
  std::lock_guard lock(mu_);
  return copies_;
}
absl::Status FakeDeviceState::TakeEnqueueFault() {
  std::lock_guard lock(mu_);
  if (!sticky_.ok()) return sticky_;
  if (enqueue_faults_ == 0) return absl::OkStatus();
  --enqueue_faults_;
  return enqueue_error_;
}
absl::Status FakeDeviceState::TakeCopyFault() {
  std::lock_guard lock(mu_);
  if (copy_faults_ == 0) return absl::OkStatus();
  --copy_faults_;
  return copy_error_;
}
absl::Status FakeDeviceState::sticky() const {
  std::lock_guard lock(mu_);
  return sticky_;
}
int FakeDeviceState::most_queued_ahead(std::uint64_t bytes) const {
  std::lock_guard lock(mu_);
  auto found = queued_ahead_.find(bytes);
  return found == queued_ahead_.end() ? 0 : found->second;
}
int FakeDeviceState::queued_of(std::uint64_t bytes) const {
  std::lock_guard lock(mu_);
  auto found = queued_of_.find(bytes);
  return found == queued_of_.end() ? 0 : found->second;
}
void FakeDeviceState::NoteQueued(std::uint64_t bytes, int queued) {
  std::lock_guard lock(mu_);
  max_queued_ = std::max(max_queued_, queued);
  int& ahead = queued_ahead_[bytes];
  ahead = std::max(ahead, queued - 1);
  ++queued_of_[bytes];
}
int FakeDeviceState::NewStream() {
  std::lock_guard lock(mu_);
  return next_stream_++;
}
std::uint64_t FakeDeviceState::Queue(int stream, int wire, std::uint64_t bytes,
                                     absl::Time queued) {
  std::lock_guard lock(mu_);
  const std::uint64_t ticket = next_ticket_++;
  queued_copies_[ticket] = Queued{stream, wire, bytes, queued};
  stream_copies_[stream].push_back(ticket);
  wire_turn_.notify_all();
  return ticket;
}
absl::Time FakeDeviceState::ReadyLocked(const Queued& copy) const {
  auto end = stream_end_.find(copy.stream);
  return end == stream_end_.end() ? copy.queued : std::max(copy.queued, end->second);
}
std::optional<absl::Time> FakeDeviceState::AwaitTurn(int wire, std::uint64_t ticket,
                                                     const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  while (true) {
    if (stop.load()) return std::nullopt;  // ForgetStream drops its copies.
    const Queued& mine = queued_copies_.at(ticket);
    const auto my_turn = std::make_pair(ReadyLocked(mine), ticket);
    bool first = !wire_busy_[wire];
    // Against the head of every other stream with a copy for this wire. A
    // copy behind another of its stream is not ready before that one ends;
    // a stream whose head is for another wire is left out (on the engine's
    // streams only same-device copies share a stream with host-to-device
    // ones, and no test on a fake clock mixes them).
    for (const auto& [stream, tickets] : stream_copies_) {
      if (!first) break;
      if (stream == mine.stream || tickets.empty()) continue;
      const Queued& head = queued_copies_.at(tickets.front());
      if (head.wire != wire) continue;
      if (std::make_pair(ReadyLocked(head), tickets.front()) < my_turn) first = false;
    }
    const absl::Time start = std::max(my_turn.first, wire_free_[wire]);
    // Only once the clock is there: a copy queued later is queued at that
    // time or after, and so is ready no earlier than this one.
    if (first && start <= clock_.Now()) {
      const absl::Time end = start + link_.latency + absl::Nanoseconds(mine.bytes / link_.gbps);
      wire_busy_[wire] = true;
      wire_free_[wire] = end;
      stream_end_[mine.stream] = end;
      stream_copies_[mine.stream].pop_front();
      queued_copies_.erase(ticket);
      return end;
    }
    // Slices: the fake clock moves without telling anyone.
    wire_turn_.wait_for(lock, std::chrono::milliseconds(1));
  }
}
void FakeDeviceState::GiveWire(int wire) {
  std::lock_guard lock(mu_);
  wire_busy_[wire] = false;
  wire_turn_.notify_all();
}
void FakeDeviceState::ForgetStream(int stream) {
  std::lock_guard lock(mu_);
  auto it = stream_copies_.find(stream);
  if (it != stream_copies_.end()) {
    for (std::uint64_t ticket : it->second) queued_copies_.erase(ticket);
    stream_copies_.erase(it);
  }
  stream_end_.erase(stream);
  wire_turn_.notify_all();
}
void FakeDeviceState::NoteCopy(bool reused) {
  std::lock_guard lock(mu_);
  ++copies_;
  if (reused) ++reused_too_early_;
}
bool FakeDeviceState::WaitWhileHung(const std::atomic<bool>& stop) {
  std::unique_lock lock(mu_);
  while (hung_) {
    if (stop.load()) return false;
    released_.wait_for(lock, std::chrono::milliseconds(1));
  }
  return !stop.load();
}

/// One in-order queue on its own thread. Markers are slots in a table;
/// a marker's state is set when the worker reaches it. Wakes run in order
/// on a second thread, beside the copies, so that one still running holds
/// back no later copy (as CUDA's host function on a stream of its own, and
/// Level Zero's waiter thread).
class FakeCopyStream : public backend::CopyStream {
 public:
  explicit FakeCopyStream(std::shared_ptr<FakeDeviceState> state)
      : state_(std::move(state)),
        id_(state_->NewStream()),
        worker_([this] { Work(); }),
        waker_([this] { Wake(); }) {}
  ~FakeCopyStream() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      stopping_atomic_.store(true);
      work_.notify_all();
    }
    {
      absl::MutexLock lock(&link_mu_);
      link_stop_ = true;
      link_cv_.SignalAll();
    }
    worker_.join();
    {
      std::lock_guard lock(mu_);
      wakes_stopping_ = true;
      wakes_ready_.notify_all();
    }
    waker_.join();
    state_->ForgetStream(id_);  // Its copies that never ran keep no other off the wire.
  }

  absl::Status HostToDevice(backend::DeviceAddress destination, const void* source,
                            std::uint64_t bytes) override {
    return Copy(reinterpret_cast<std::byte*>(destination), source, bytes, 0);
  }
  absl::Status DeviceToHost(void* destination, backend::DeviceAddress source,
                            std::uint64_t bytes) override {
    return Copy(destination, reinterpret_cast<const void*>(source), bytes, 1);
  }
  absl::Status DeviceToDevice(backend::DeviceAddress destination, backend::DeviceAddress source,
                              std::uint64_t bytes) override {
    return Copy(reinterpret_cast<std::byte*>(destination), reinterpret_cast<const void*>(source),
                bytes, 2);
  }

  absl::StatusOr<backend::Marker> Mark() override {
    if (absl::Status sticky = state_->sticky(); !sticky.ok()) return sticky;
    std::lock_guard lock(mu_);
    backend::Marker marker;
    if (free_markers_.empty()) {
      marker = static_cast<backend::Marker>(markers_.size());
      markers_.emplace_back();
    } else {
      marker = free_markers_.back();
      free_markers_.pop_back();
    }
    markers_[marker] = MarkerState{.live = true, .reached = false, .status = absl::OkStatus()};
    Op op;
    op.kind = Op::kMark;
    op.marker = marker;
    Push(std::move(op));
    return marker;
  }
  absl::StatusOr<bool> Reached(backend::Marker marker) override {
    if (absl::Status sticky = state_->sticky(); !sticky.ok()) return sticky;
    std::lock_guard lock(mu_);
    if (marker >= markers_.size() || !markers_[marker].live) {
      return absl::InvalidArgumentError(absl::StrCat("marker ", marker, " is not live"));
    }
    const MarkerState& state = markers_[marker];
    if (!state.status.ok()) return state.status;
    return state.reached;
  }
  void Forget(backend::Marker marker) override {
    std::lock_guard lock(mu_);
    if (marker >= markers_.size() || !markers_[marker].live) return;  // Twice: nothing.
    markers_[marker].live = false;
    free_markers_.push_back(marker);
  }
  absl::Status WakeWhenDone(std::function<void()> wake) override {
    if (absl::Status sticky = state_->sticky(); !sticky.ok()) return sticky;
    std::lock_guard lock(mu_);
    Op op;
    op.kind = Op::kWake;
    op.wake = std::move(wake);
    Push(std::move(op));
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] { return (ops_.empty() && !busy_) || stopping_; });
    return state_->sticky();
  }

 private:
  struct Op {
    enum Kind { kCopy, kMark, kWake } kind = kCopy;
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::uint64_t bytes = 0;
    int wire = 0;
    std::uint64_t checksum = 0;
    std::uint64_t ticket = 0;  // Its place in the link's schedule.
    backend::Marker marker = 0;
    std::function<void()> wake;
  };
  struct MarkerState {
    bool live = false;  // Marked and not forgotten.
    bool reached = false;
    absl::Status status;
  };

  absl::Status Copy(void* destination, const void* source, std::uint64_t bytes, int wire) {
    if (absl::Status fault = state_->TakeEnqueueFault(); !fault.ok()) return fault;
    FakeDeviceState::EnqueueHook hook;
    {
      std::lock_guard state_lock(state_->mu_);
      hook = state_->on_enqueue_;
    }
    if (hook) hook(destination, source, bytes);
    Op op;
    op.destination = static_cast<std::byte*>(destination);
    op.source = static_cast<const std::byte*>(source);
    op.bytes = bytes;
    op.wire = wire;
    std::lock_guard lock(mu_);
    // Under the stream's lock: its copies are queued in its order.
    op.ticket = state_->Queue(id_, wire, bytes, state_->clock().Now());
    // Until the copy lands its destination holds garbage, as a GPU's would.
    std::memset(op.destination, static_cast<int>(kPoison), bytes);
    op.checksum = Checksum(op.source, bytes);
    ++queued_copies_;
    state_->NoteQueued(bytes, queued_copies_);
    Push(std::move(op));
    state_->NoteEnqueued();
    return absl::OkStatus();
  }

  void Push(Op op) {
    ops_.push_back(std::move(op));
    work_.notify_one();
  }

  void Work() {
    while (true) {
      Op op;
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [this] { return stopping_ || !ops_.empty(); });
        if (stopping_) return;
        op = std::move(ops_.front());
        ops_.pop_front();
        busy_ = true;
      }
      if (op.kind == Op::kCopy && !Run(op)) return;
      std::lock_guard lock(mu_);
      if (op.kind == Op::kCopy) --queued_copies_;
      if (op.kind == Op::kMark) {
        markers_[op.marker].reached = pending_error_.ok();
        markers_[op.marker].status = pending_error_;
        pending_error_ = absl::OkStatus();
      }
      busy_ = false;
      if (op.kind == Op::kWake) {
        wakes_.push_back(std::move(op.wake));
        wakes_ready_.notify_one();
      }
      idle_.notify_all();
    }
  }

  // Runs the wakes the worker reached, in order, without the stream's mutex.
  void Wake() {
    while (true) {
      std::function<void()> wake;
      {
        std::unique_lock lock(mu_);
        wakes_ready_.wait(lock, [this] { return wakes_stopping_ || !wakes_.empty(); });
        if (wakes_.empty()) return;
        wake = std::move(wakes_.front());
        wakes_.pop_front();
      }
      wake();
    }
  }

  // The modelled link: one copy per direction at a time, taking latency +
  // bytes / bandwidth in the link's clock. False when the stream is being
  // destroyed while hung or before the copy's end came.
  bool Run(Op& op) {
    if (!state_->WaitWhileHung(stopping_atomic_)) return false;
    const std::optional<absl::Time> end = state_->AwaitTurn(op.wire, op.ticket, stopping_atomic_);
    if (!end.has_value()) return false;
    if (!WaitForTheLink(*end)) {
      state_->GiveWire(op.wire);
      return false;
    }
    const bool reused = Checksum(op.source, op.bytes) != op.checksum;
    absl::Status fault = state_->TakeCopyFault();
    if (fault.ok()) {
      std::memcpy(op.destination, op.source, op.bytes);
    } else {
      std::lock_guard lock(mu_);
      pending_error_ = fault;
    }
    state_->NoteCopy(reused);
    state_->GiveWire(op.wire);
    return true;
  }

  // Until the link's clock reaches `end`; false when the stream stops first.
  bool WaitForTheLink(absl::Time end) {
    absl::MutexLock lock(&link_mu_);
    while (!link_stop_) {
      if (state_->clock().WaitWithDeadline(&link_mu_, &link_cv_, end)) return true;
    }
    return false;
  }

  std::shared_ptr<FakeDeviceState> state_;
  const int id_;  // In the link's schedule.
  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<Op> ops_;
  bool busy_ = false;
  bool stopping_ = false;
  std::atomic<bool> stopping_atomic_{false};
  int queued_copies_ = 0;
  std::vector<MarkerState> markers_;
  std::vector<backend::Marker> free_markers_;
  absl::Status pending_error_;
  std::condition_variable wakes_ready_;
  std::deque<std::function<void()>> wakes_;
  bool wakes_stopping_ = false;
  // The wait for the link's clock, which Clock::WaitWithDeadline makes on
  // an absl::Mutex; raised by the destructor.
  absl::Mutex link_mu_;
  absl::CondVar link_cv_;
  bool link_stop_ ABSL_GUARDED_BY(link_mu_) = false;
  std::thread worker_;
  std::thread waker_;
};

absl::StatusOr<std::span<std::byte>> FakeCopyDevice::AllocateStaging(std::uint64_t bytes) {
  if (absl::Status sticky = state_->sticky(); !sticky.ok()) return sticky;
  if (bytes == 0) return absl::InvalidArgumentError("no staging of 0 bytes");
  std::lock_guard lock(mu_);
  staging_.push_back(std::make_unique<std::byte[]>(bytes));
  spans_.emplace_back(staging_.back().get(), bytes);
  return spans_.back();
}

absl::StatusOr<std::unique_ptr<backend::CopyStream>> FakeCopyDevice::NewStream() {
  if (absl::Status sticky = state_->sticky(); !sticky.ok()) return sticky;
  return std::make_unique<FakeCopyStream>(state_);
}

bool FakeCopyDevice::IsStaging(const void* pointer) const {
  std::lock_guard lock(mu_);
  const auto* byte = static_cast<const std::byte*>(pointer);
  for (const std::span<std::byte>& span : spans_) {
    if (byte >= span.data() && byte < span.data() + span.size()) return true;
  }
  return false;
}

backend::SegmentMemory FakeDeviceMemory(int device, std::byte* bytes) {
  backend::SegmentMemory memory;
  memory.device = device;
  memory.device_address = reinterpret_cast<backend::DeviceAddress>(bytes);
  return memory;
}

}  // namespace memd::test
