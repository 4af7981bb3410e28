// ChunkPipeline: one device's chunks, from issue to end, on each data path.

#include "daemon/transfer/chunk_pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

absl::StatusOr<std::unique_ptr<ChunkPipeline>> ChunkPipeline::Create(
    EngineCore& core, int index, std::shared_ptr<Waker> waker) {
  const EngineOptions& options = core.options();
  backend::CopyDevice& device = core.device(index);
  MEMD_ASSIGN_OR_RETURN(StagingRing ring,
                        StagingRing::Allocate(device, options.staging_slots, options.slot_bytes));
  std::unique_ptr<ChunkPipeline> pipeline(
      new ChunkPipeline(core, index, std::move(ring), std::move(waker)));
  pipeline->queues_ = {&pipeline->in_, &pipeline->out_, &pipeline->critical_in_,
                       &pipeline->critical_out_};
  for (Queue* queue : pipeline->queues_) {
    MEMD_ASSIGN_OR_RETURN(queue->stream, device.NewStream());
    queue->device = index;
  }
  pipeline->peers_.resize(core.device_count());
  for (int other = 0; other < core.device_count(); ++other) {
    if (other == index) continue;
    MEMD_ASSIGN_OR_RETURN(pipeline->peers_[other].stream, core.device(other).NewStream());
    pipeline->peers_[other].device = other;
    pipeline->queues_.push_back(&pipeline->peers_[other]);
  }
  pipeline->counters_.slots.store(options.staging_slots);
  return pipeline;
}

ChunkPipeline::ChunkPipeline(EngineCore& core, int index, StagingRing ring,
                             std::shared_ptr<Waker> waker)
    : core_(core),
      clock_(core.clock()),
      index_(index),
      lane_(DeviceLaneOf(index)),
      counters_(core.counters(index)),
      waker_(std::move(waker)),
      ring_(std::move(ring)),
      copy_(core.options().copy_threads) {}

// The streams go before the ring: their destructors wait for what was
// enqueued, which may still read or write a slot.
ChunkPipeline::~ChunkPipeline() = default;

bool ChunkPipeline::NeedsSlot(const TransferRecord& record) {
  return record.path == DataPath::kStaged || record.path == DataPath::kPeerStaged;
}

bool ChunkPipeline::IntoDevice(const TransferRecord& record) {
  return record.direction == Direction::kHostToDevice || record.path == DataPath::kDevice;
}

// By the class the client asked for, not the aged one: a transfer's chunks
// stay on one stream.
ChunkPipeline::Queue& ChunkPipeline::QueueFor(const TransferRecord& record) {
  if (record.priority == Priority::kCritical) {
    return IntoDevice(record) ? critical_in_ : critical_out_;
  }
  return IntoDevice(record) ? in_ : out_;
}

bool ChunkPipeline::Fits(const TransferRecord& record) {
  if (QueueFor(record).fifo.size() >= static_cast<std::size_t>(core_.options().chunks_in_flight)) {
    return false;
  }
  // With three slots or more, the last free one is a critical copy's: it
  // never waits for another class's chunk to give a slot back. Fewer slots
  // keep nothing back, or a ring of one would move nothing but critical copies.
  const int kept = record.priority != Priority::kCritical && ring_.size() >= 3 ? 1 : 0;
  return !NeedsSlot(record) || ring_.free() > kept;
}

void ChunkPipeline::Issue(Chunk chunk) {
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
absl::Status ChunkPipeline::Enqueue(const Chunk& chunk, int slot, Queue& queue) {
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
void ChunkPipeline::Record(Queue& queue, InFlight entry) {
  absl::StatusOr<backend::Marker> marker = queue.stream->Mark();
  if (!marker.ok()) {
    Fail(entry, marker.status(), /*enqueued=*/true, queue);
    return;
  }
  entry.marker = *marker;
  Waker* waker = waker_.get();  // Outlives the streams: they go first.
  // A wake that cannot be arranged leaves the lane's short nap to notice.
  (void)queue.stream->WakeWhenDone([waker] { waker->Wake(); });
  queue.fifo.push(std::move(entry));
}

// A leg's marker was reached: the next leg, the drain into the
// destination, or the chunk is done.
bool ChunkPipeline::Complete(InFlight& done) {
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

// Fills or drains a slot. The lane notices a chunk's end and a new
// transfer only between its own steps, so a critical copy would wait for
// all of another class's 4 MiB fill or drain (0.27-0.48 ms on the first
// H100, where the allowance was 2 DMA chunk times, 0.15 ms): such a copy
// lets critical chunks in between the pieces of the lane thread's share
// (LetCriticalIn). One let in is staged here, on this thread alone: the
// copy threads are busy with the copy it interrupted.
void ChunkPipeline::Stage(std::byte* to, const std::byte* from, std::uint64_t bytes,
                          const TransferRecord& record, Stores stores) {
  if (staging_) {
    CopyWith(stores, to, from, bytes);
    return;
  }
  staging_ = true;
  {
    StagingTimer timer(clock_, counters_.staging_ns);
    if (record.priority == Priority::kCritical) {
      copy_.Copy(to, from, bytes, stores);
    } else {
      copy_.Copy(to, from, bytes, stores, [this] { LetCriticalIn(); });
    }
  }
  staging_ = false;
}

void ChunkPipeline::LetCriticalIn() {
  const std::uint64_t submits = core_.critical_submits();
  if (submits == critical_seen_ && critical_in_.fifo.empty() && critical_out_.fifo.empty()) {
    return;
  }
  critical_seen_ = submits;
  PollQueue(critical_in_);
  PollQueue(critical_out_);
  const absl::Time now = clock_.Now();
  CountDmaTime(now);
  // One chunk at a time: Fits sees the last one issued.
  for (bool first = true;; first = false) {
    std::optional<Chunk> next;
    {
      CoreLock lock(core_);
      if (first) ReportOutcomes(now);
      next = core_.TakeCriticalChunk(lane_, now,
                                     [this](const TransferRecord& r) { return Fits(r); });
    }
    if (first) outcomes_.clear();  // Outside the lock: a record's last reference may go here.
    if (!next) return;
    Issue(std::move(*next));
  }
}

void ChunkPipeline::ReleaseSlot(InFlight& entry) {
  if (entry.slot < 0) return;
  ring_.Release(entry.slot);
  counters_.slots_in_use.fetch_sub(1);
  entry.slot = -1;
}

void ChunkPipeline::Succeed(InFlight& entry) {
  ReleaseSlot(entry);
  outcomes_.push_back(Outcome{std::move(entry.chunk), absl::OkStatus()});
}

// `enqueued`: the leg's copy is queued and may still read or write the slot,
// so the stream is drained before the slot is reused. Not a broken device's
// (a sticky error between the copy and its marker): it may never finish the
// copy, and a lane waiting for it would never end a transfer again nor
// stop. Its slot is given up at once, as PollQueue and Drop give up those
// of the chunks it holds: a broken context moves no more bytes.
void ChunkPipeline::Fail(InFlight& entry, absl::Status status, bool enqueued, Queue& queue) {
  if (enqueued && core_.device(queue.device).health().ok()) (void)queue.stream->Synchronize();
  ReleaseSlot(entry);
  outcomes_.push_back(Outcome{std::move(entry.chunk), std::move(status)});
}


void ChunkPipeline::ReportOutcomes(absl::Time now) {
  for (Outcome& outcome : outcomes_) {
    if (outcome.status.ok()) {
      core_.ChunkDone(outcome.chunk, now);
    } else {
      core_.ChunkFailed(outcome.chunk, outcome.status, now);
    }
  }
}

bool ChunkPipeline::Poll() {
  bool look_again = false;
  for (Queue* queue : queues_) look_again |= PollQueue(*queue);
  return look_again;
}

void ChunkPipeline::DropAll(const absl::Status& why) {
  for (Queue* queue : queues_) Drop(*queue, why);
}

// Takes in the queue's finished chunks, in order, but stops after one whose
// slot it drained into host memory: the lane then issues the next chunk
// before draining another, so the device always has DMA queued. Draining
// every finished chunk first left the device idle after each batch: on an
// H100 the d2h lane slept ~0.2 ms per 1.6 chunks waiting for the DMAs it
// issued only afterwards (docs/benchmarks.md). True when it stopped early:
// the caller must look again before sleeping, since the wakes of the chunks
// left behind have fired already.
bool ChunkPipeline::PollQueue(Queue& queue) {
  while (!queue.fifo.empty()) {
    InFlight& head = queue.fifo.front();
    absl::StatusOr<bool> reached = queue.stream->Reached(head.marker);
    if (reached.ok() && !*reached) return false;  // In order: nothing later is done either.
    queue.stream->Forget(head.marker);
    InFlight entry = std::move(head);
    queue.fifo.pop();
    if (!reached.ok()) {
      Fail(entry, reached.status(), /*enqueued=*/false, queue);
    } else if (Complete(entry) && !queue.fifo.empty()) {
      return true;
    }
  }
  return false;
}

// The device broke, or the engine stops and the device never finished:
// what it holds is given up (the records keep their holds until here).
void ChunkPipeline::Drop(Queue& queue, const absl::Status& why) {
  while (!queue.fifo.empty()) {
    InFlight entry = std::move(queue.fifo.front());
    queue.fifo.pop();
    queue.stream->Forget(entry.marker);
    ReleaseSlot(entry);
    outcomes_.push_back(Outcome{std::move(entry.chunk), why});
  }
}

bool ChunkPipeline::Busy() const {
  for (const Queue* queue : queues_) {
    if (!queue->fifo.empty()) return true;
  }
  return false;
}

void ChunkPipeline::CountDmaTime(absl::Time now) {
  const bool busy = Busy();
  if (busy && busy_since_ == absl::InfinitePast()) {
    busy_since_ = now;
  } else if (!busy && busy_since_ != absl::InfinitePast()) {
    counters_.dma_ns.fetch_add(absl::ToInt64Nanoseconds(now - busy_since_));
    busy_since_ = absl::InfinitePast();
  }
}

}  // namespace memd::transfer
