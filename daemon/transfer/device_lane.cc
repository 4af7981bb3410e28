#include "daemon/transfer/device_lane.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "common/status_macros.h"

namespace memd::transfer {

absl::StatusOr<std::unique_ptr<DeviceLane>> DeviceLane::Create(EngineCore& core, int index) {
  const EngineOptions& options = core.options();
  backend::CopyDevice& device = core.device(index);
  MEMD_ASSIGN_OR_RETURN(StagingRing ring,
                        StagingRing::Allocate(device, options.staging_slots, options.slot_bytes));
  std::unique_ptr<DeviceLane> lane(new DeviceLane(core, index, std::move(ring)));
  lane->queues_ = {&lane->in_, &lane->out_, &lane->critical_in_, &lane->critical_out_};
  for (Queue* queue : lane->queues_) {
    MEMD_ASSIGN_OR_RETURN(queue->stream, device.NewStream());
    queue->device = index;
  }
  lane->peers_.resize(core.device_count());
  for (int other = 0; other < core.device_count(); ++other) {
    if (other == index) continue;
    MEMD_ASSIGN_OR_RETURN(lane->peers_[other].stream, core.device(other).NewStream());
    lane->peers_[other].device = other;
    lane->queues_.push_back(&lane->peers_[other]);
  }
  lane->counters_.slots.store(options.staging_slots);
  return lane;
}

DeviceLane::DeviceLane(EngineCore& core, int index, StagingRing ring)
    : core_(core),
      clock_(core.clock()),
      index_(index),
      lane_(index + 1),
      device_(core.device(index)),
      counters_(core.counters(index)),
      ring_(std::move(ring)),
      copy_(core.options().copy_threads) {}

// Joins the thread before the streams go (their destructors wait for what
// was enqueued).
DeviceLane::~DeviceLane() { Stop(); }

void DeviceLane::Run() {
  while (Step()) {
  }
}

// One turn: take in what the device finished, tell the engine, let it end
// what must end, then issue the next chunk or sleep.
bool DeviceLane::Step() {
  bool look_again = false;  // Finished chunks may be left for the next turn.
  if (broken_ || abandon_) {
    const absl::Status why =
        broken_ ? broken_status_
                : absl::CancelledError("the engine stopped with the chunk still on the device");
    for (Queue* queue : queues_) Drop(*queue, why);
  } else {
    for (Queue* queue : queues_) look_again |= PollQueue(*queue);
  }
  const absl::Status health = broken_ ? absl::OkStatus() : device_.health();
  std::optional<Chunk> next;
  absl::Time wake = absl::InfiniteFuture();
  bool exit = false;
  const absl::Time now = clock_.Now();
  // Before the core hears of the finished chunks: a transfer reported done
  // has its DMA time counted already.
  CountDmaTime(now);
  {
    CoreLock lock(core_);
    if (!health.ok()) {
      core_.FailDevice(index_, health);
      broken_ = true;
      broken_status_ = health;
    }
    ReportOutcomes(now);
    core_.Sweep(lane_, now);
    if (stopping() && core_.LaneIdle(lane_)) {
      if (!Busy()) {
        exit = true;
      } else if (stop_by_ == absl::InfiniteFuture()) {
        stop_by_ = now + core_.options().stall_timeout;
      } else if (now >= stop_by_) {
        abandon_ = true;
      }
    }
    if (!exit && !broken_) {
      next = core_.TakeChunk(lane_, now, [this](const TransferRecord& r) { return Fits(r); });
    }
    if (!next) wake = std::min(core_.NextWake(lane_, now), stop_by_);
  }
  outcomes_.clear();  // Outside the lock: a record's last reference may go here.
  if (exit) return false;
  if (next) {
    Issue(std::move(*next));
    CountDmaTime(clock_.Now());
    return true;
  }
  // A broken lane sleeps once it has dropped all its device held: the core
  // failed its transfers and refuses new ones, so only Stop (which wakes
  // it) is left. It used to turn without pause, a core's worth of CPU.
  const bool dropping = broken_ && Busy();
  if (!abandon_ && !look_again && !dropping) waker()->WaitUntil(clock_, wake);
  return true;
}

void DeviceLane::ReportOutcomes(absl::Time now) {
  for (Outcome& outcome : outcomes_) {
    if (outcome.status.ok()) {
      core_.ChunkDone(outcome.chunk, now);
    } else {
      core_.ChunkFailed(outcome.chunk, outcome.status, now);
    }
  }
}

// Takes in the queue's finished chunks, in order, but stops after one whose
// slot it drained into host memory: the lane then issues the next chunk
// before draining another, so the device always has DMA queued. Draining
// every finished chunk first left the device idle after each batch: on an
// H100 the d2h lane slept ~0.2 ms per 1.6 chunks waiting for the DMAs it
// issued only afterwards (docs/benchmarks.md). True when it stopped early:
// the caller must look again before sleeping, since the wakes of the chunks
// left behind have fired already.
bool DeviceLane::PollQueue(Queue& queue) {
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
void DeviceLane::Drop(Queue& queue, const absl::Status& why) {
  while (!queue.fifo.empty()) {
    InFlight entry = std::move(queue.fifo.front());
    queue.fifo.pop();
    queue.stream->Forget(entry.marker);
    ReleaseSlot(entry);
    outcomes_.push_back(Outcome{std::move(entry.chunk), why});
  }
}

bool DeviceLane::Busy() const {
  for (const Queue* queue : queues_) {
    if (!queue->fifo.empty()) return true;
  }
  return false;
}

// DMA time: while some chunk of this lane is queued on a device, as the
// lane sees it (rounded up to when it looks).
void DeviceLane::CountDmaTime(absl::Time now) {
  const bool busy = Busy();
  if (busy && busy_since_ == absl::InfinitePast()) {
    busy_since_ = now;
  } else if (!busy && busy_since_ != absl::InfinitePast()) {
    counters_.dma_ns.fetch_add(absl::ToInt64Nanoseconds(now - busy_since_));
    busy_since_ = absl::InfinitePast();
  }
}

}  // namespace memd::transfer
