// DeviceLane: the legs of one chunk on each data path.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/transfer/device_lane.h"

namespace memd::transfer {
namespace {

// Adds the time since it was made, in the engine's clock, to a counter
// when it goes out of scope.
class StagingTimer {
 public:
  StagingTimer(const Clock& clock, std::atomic<std::int64_t>& counter)
      : clock_(clock), counter_(counter), start_(clock.Now()) {}
  ~StagingTimer() { counter_.fetch_add(absl::ToInt64Nanoseconds(clock_.Now() - start_)); }

 private:
  const Clock& clock_;
  std::atomic<std::int64_t>& counter_;
  absl::Time start_;
};

}  // namespace

bool DeviceLane::NeedsSlot(const TransferRecord& record) {
  return record.path == DataPath::kStaged || record.path == DataPath::kPeerStaged;
}

bool DeviceLane::IntoDevice(const TransferRecord& record) {
  return record.direction == Direction::kHostToDevice || record.path == DataPath::kDevice;
}

// By the class the client asked for, not the aged one: a transfer's chunks
// stay on one stream.
DeviceLane::Queue& DeviceLane::QueueFor(const TransferRecord& record) {
  if (record.priority == Priority::kCritical) {
    return IntoDevice(record) ? critical_in_ : critical_out_;
  }
  return IntoDevice(record) ? in_ : out_;
}

bool DeviceLane::Fits(const TransferRecord& record) {
  if (QueueFor(record).fifo.size() >= static_cast<std::size_t>(core_.options().chunks_in_flight)) {
    return false;
  }
  // With three slots or more, the last free one is a critical copy's: it
  // never waits for another class's chunk to give a slot back. Fewer slots
  // keep nothing back, or a ring of one would move nothing but critical copies.
  const int kept = record.priority != Priority::kCritical && ring_.size() >= 3 ? 1 : 0;
  return !NeedsSlot(record) || ring_.free() > kept;
}

void DeviceLane::Issue(Chunk chunk) {
  Queue& queue = QueueFor(*chunk.record);
  InFlight entry;
  entry.leg = IntoDevice(*chunk.record) ? Leg::kIn : Leg::kOut;
  if (NeedsSlot(*chunk.record)) {
    entry.slot = ring_.Acquire();
    counters_.slots_in_use.fetch_add(1);
  }
  entry.chunk = std::move(chunk);
  absl::Status enqueued = Enqueue(entry.chunk, entry.slot, queue);
  if (!enqueued.ok()) {
    Fail(entry, std::move(enqueued), /*enqueued=*/false, queue);
    return;
  }
  Record(queue, std::move(entry));
}

// The first (often only) leg: fill the slot from a pageable source, then
// queue the DMA.
absl::Status DeviceLane::Enqueue(const Chunk& chunk, int slot, Queue& queue) {
  const TransferRecord& record = *chunk.record;
  const std::uint64_t offset = chunk.offset;
  const std::uint64_t bytes = chunk.bytes;
  const backend::SegmentMemory& from = record.source.memory;
  const backend::SegmentMemory& to = record.destination.memory;
  switch (record.direction) {
    case Direction::kHostToDevice:
      if (slot < 0) {
        return queue.stream->HostToDevice(to.device_address + offset, from.host + offset, bytes);
      }
      Stage(ring_.data(slot), from.host + offset, bytes, record, Stores::kCached);
      return queue.stream->HostToDevice(to.device_address + offset, ring_.data(slot), bytes);
    case Direction::kDeviceToHost:
      return queue.stream->DeviceToHost(slot < 0 ? to.host + offset : ring_.data(slot),
                                        from.device_address + offset, bytes);
    case Direction::kDeviceToDevice:
      if (record.path == DataPath::kDevice) {
        return queue.stream->DeviceToDevice(to.device_address + offset,
                                            from.device_address + offset, bytes);
      }
      return queue.stream->DeviceToHost(ring_.data(slot), from.device_address + offset, bytes);
    case Direction::kHostToHost:
      break;
  }
  return absl::InternalError(absl::StrCat("transfer ", record.id,
                                          ": a host-to-host copy reached device lane ", index_));
}

// Marks the queued leg and asks to be woken when it is done.
void DeviceLane::Record(Queue& queue, InFlight entry) {
  absl::StatusOr<backend::Marker> marker = queue.stream->Mark();
  if (!marker.ok()) {
    Fail(entry, marker.status(), /*enqueued=*/true, queue);
    return;
  }
  entry.marker = *marker;
  Waker* waker = this->waker().get();  // Outlives the streams: Lane's own.
  // A wake that cannot be arranged leaves the lane's short nap to notice.
  (void)queue.stream->WakeWhenDone([waker] { waker->Wake(); });
  queue.fifo.push(std::move(entry));
}

// A leg's marker was reached: the next leg, the drain into the
// destination, or the chunk is done.
bool DeviceLane::Complete(InFlight& done) {
  const TransferRecord& record = *done.chunk.record;
  const std::uint64_t offset = done.chunk.offset;
  const std::uint64_t bytes = done.chunk.bytes;
  if (done.leg == Leg::kOut && record.path == DataPath::kPeerStaged) {
    Queue& peer = peers_[record.peer_index];
    absl::Status enqueued = peer.stream->HostToDevice(
        record.destination.memory.device_address + offset, ring_.data(done.slot), bytes);
    if (!enqueued.ok()) {
      Fail(done, std::move(enqueued), /*enqueued=*/false, peer);
      return false;
    }
    done.leg = Leg::kPeerIn;
    Record(peer, std::move(done));
    return false;
  }
  if (done.leg == Leg::kOut && done.slot >= 0) {
    // Only now are the bytes in the slot: a D2H read earlier sees garbage.
    // Streaming stores: the client's buffer is written, not read, here, and
    // memcpy's read of each line before overwriting it made this copy the
    // d2h limit on a real GPU (docs/benchmarks.md, "first real GPU").
    Stage(record.destination.memory.host + offset, ring_.data(done.slot), bytes, record,
          Stores::kStreaming);
    Succeed(done);
    return true;
  }
  Succeed(done);
  return false;
}

// Fills or drains a slot. The lane notices a chunk's end only between its
// own steps, so a critical chunk that ends during another class's 4 MiB
// fill would wait for all of it: while a critical chunk is on the device,
// such a copy goes a piece at a time, taking in ended chunks between pieces.
void DeviceLane::Stage(std::byte* to, const std::byte* from, std::uint64_t bytes,
                       const TransferRecord& record, Stores stores) {
  constexpr std::uint64_t kPiece = std::uint64_t{1} << 20;
  std::uint64_t done = 0;
  while (done < bytes) {
    const bool piecewise = record.priority != Priority::kCritical &&
                           (!critical_in_.fifo.empty() || !critical_out_.fifo.empty());
    const std::uint64_t piece = piecewise ? std::min(kPiece, bytes - done) : bytes - done;
    {
      StagingTimer timer(clock_, counters_.staging_ns);
      copy_.Copy(to + done, from + done, piece, stores);
    }
    done += piece;
    if (piecewise) TakeInCriticalChunks();
  }
}

void DeviceLane::TakeInCriticalChunks() {
  PollQueue(critical_in_);
  PollQueue(critical_out_);
  if (outcomes_.empty()) return;
  const absl::Time now = clock_.Now();
  CountDmaTime(now);
  {
    CoreLock lock(core_);
    ReportOutcomes(now);
  }
  outcomes_.clear();  // Outside the lock: a record's last reference may go here.
}

void DeviceLane::ReleaseSlot(InFlight& entry) {
  if (entry.slot < 0) return;
  ring_.Release(entry.slot);
  counters_.slots_in_use.fetch_sub(1);
  entry.slot = -1;
}

void DeviceLane::Succeed(InFlight& entry) {
  ReleaseSlot(entry);
  outcomes_.push_back(Outcome{std::move(entry.chunk), absl::OkStatus()});
}

// `enqueued`: the leg's copy is queued and may still read or write the slot,
// so the stream is drained before the slot is reused. Not a broken device's
// (a sticky error between the copy and its marker): it may never finish the
// copy, and a lane waiting for it would never end a transfer again nor
// stop. Its slot is given up at once, as PollQueue and Drop give up those
// of the chunks it holds: a broken context moves no more bytes.
void DeviceLane::Fail(InFlight& entry, absl::Status status, bool enqueued, Queue& queue) {
  if (enqueued && core_.device(queue.device).health().ok()) (void)queue.stream->Synchronize();
  ReleaseSlot(entry);
  outcomes_.push_back(Outcome{std::move(entry.chunk), std::move(status)});
}

}  // namespace memd::transfer
