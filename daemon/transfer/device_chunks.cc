// DeviceLane: the legs of one chunk on each data path.

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/transfer/device_lane.h"

namespace memd::transfer {
namespace {

// Adds the time since `start` to a counter when it goes out of scope.
class StagingTimer {
 public:
  explicit StagingTimer(std::atomic<std::int64_t>& counter)
      : counter_(counter), start_(absl::Now()) {}
  ~StagingTimer() { counter_.fetch_add(absl::ToInt64Nanoseconds(absl::Now() - start_)); }

 private:
  std::atomic<std::int64_t>& counter_;
  absl::Time start_;
};

}  // namespace

bool DeviceLane::NeedsSlot(const TransferRecord& record) {
  return record.path == DataPath::kStaged || record.path == DataPath::kPeerStaged;
}

DeviceLane::Queue& DeviceLane::QueueFor(const TransferRecord& record) {
  const bool into_device = record.direction == Direction::kHostToDevice ||
                           record.path == DataPath::kDevice;
  return into_device ? in_ : out_;
}

bool DeviceLane::Fits(const TransferRecord& record) {
  if (QueueFor(record).fifo.size() >= static_cast<std::size_t>(core_.options().chunks_in_flight)) {
    return false;
  }
  return !NeedsSlot(record) || ring_.free() > 0;
}

void DeviceLane::Issue(Chunk chunk) {
  Queue& queue = QueueFor(*chunk.record);
  InFlight entry;
  entry.leg = &queue == &in_ ? Leg::kIn : Leg::kOut;
  if (NeedsSlot(*chunk.record)) {
    entry.slot = ring_.Acquire();
    counters_.slots_in_use.fetch_add(1);
  }
  entry.chunk = std::move(chunk);
  absl::Status enqueued = Enqueue(entry.chunk, entry.slot);
  if (!enqueued.ok()) {
    Fail(entry, std::move(enqueued), /*enqueued=*/false, queue);
    return;
  }
  Record(queue, std::move(entry));
}

// The first (often only) leg: fill the slot from a pageable source, then
// queue the DMA.
absl::Status DeviceLane::Enqueue(const Chunk& chunk, int slot) {
  const TransferRecord& record = *chunk.record;
  const std::uint64_t offset = chunk.offset;
  const std::uint64_t bytes = chunk.bytes;
  const backend::SegmentMemory& from = record.source.memory;
  const backend::SegmentMemory& to = record.destination.memory;
  switch (record.direction) {
    case Direction::kHostToDevice:
      if (slot < 0) return in_.stream->HostToDevice(to.device_address + offset, from.host + offset, bytes);
      {
        StagingTimer timer(counters_.staging_ns);
        copy_.Copy(ring_.data(slot), from.host + offset, bytes);
      }
      return in_.stream->HostToDevice(to.device_address + offset, ring_.data(slot), bytes);
    case Direction::kDeviceToHost:
      return out_.stream->DeviceToHost(slot < 0 ? to.host + offset : ring_.data(slot),
                                       from.device_address + offset, bytes);
    case Direction::kDeviceToDevice:
      if (record.path == DataPath::kDevice) {
        return in_.stream->DeviceToDevice(to.device_address + offset,
                                          from.device_address + offset, bytes);
      }
      return out_.stream->DeviceToHost(ring_.data(slot), from.device_address + offset, bytes);
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
void DeviceLane::Complete(InFlight& done) {
  const TransferRecord& record = *done.chunk.record;
  const std::uint64_t offset = done.chunk.offset;
  const std::uint64_t bytes = done.chunk.bytes;
  if (done.leg == Leg::kOut && record.path == DataPath::kPeerStaged) {
    Queue& peer = peers_[record.peer_index];
    absl::Status enqueued = peer.stream->HostToDevice(
        record.destination.memory.device_address + offset, ring_.data(done.slot), bytes);
    if (!enqueued.ok()) {
      Fail(done, std::move(enqueued), /*enqueued=*/false, peer);
      return;
    }
    done.leg = Leg::kPeerIn;
    Record(peer, std::move(done));
    return;
  }
  if (done.leg == Leg::kOut && done.slot >= 0) {
    // Only now are the bytes in the slot: a D2H read earlier sees garbage.
    StagingTimer timer(counters_.staging_ns);
    copy_.Copy(record.destination.memory.host + offset, ring_.data(done.slot), bytes);
  }
  Succeed(done);
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
// so the stream is drained before the slot is reused.
void DeviceLane::Fail(InFlight& entry, absl::Status status, bool enqueued, Queue& queue) {
  if (enqueued) (void)queue.stream->Synchronize();
  ReleaseSlot(entry);
  outcomes_.push_back(Outcome{std::move(entry.chunk), std::move(status)});
}

}  // namespace memd::transfer
