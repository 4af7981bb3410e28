#include "daemon/transfer/device_lane.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "common/status_macros.h"

namespace memd::transfer {

absl::StatusOr<std::unique_ptr<DeviceLane>> DeviceLane::Create(EngineCore& core, int index) {
  std::unique_ptr<DeviceLane> lane(new DeviceLane(core, index));
  MEMD_ASSIGN_OR_RETURN(lane->chunks_, ChunkPipeline::Create(core, index, lane->waker()));
  return lane;
}

DeviceLane::DeviceLane(EngineCore& core, int index)
    : core_(core),
      clock_(core.clock()),
      index_(index),
      lane_(DeviceLaneOf(index)),
      device_(core.device(index)) {}

// Joins the thread before the pipeline goes (its streams' destructors wait
// for what was enqueued).
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
    chunks_->DropAll(broken_ ? broken_status_
                             : absl::CancelledError(
                                   "the engine stopped with the chunk still on the device"));
  } else {
    look_again = chunks_->Poll();
  }
  const absl::Status health = broken_ ? absl::OkStatus() : device_.health();
  std::optional<Chunk> next;
  absl::Time wake = absl::InfiniteFuture();
  bool exit = false;
  const absl::Time now = clock_.Now();
  // Before the core hears of the finished chunks: a transfer reported done
  // has its DMA time counted already.
  chunks_->CountDmaTime(now);
  {
    CoreLock lock(core_);
    if (!health.ok()) {
      core_.FailDevice(index_, health);
      broken_ = true;
      broken_status_ = health;
    }
    chunks_->ReportOutcomes(now);
    core_.Sweep(lane_, now);
    if (stopping() && core_.LaneIdle(lane_)) {
      if (!chunks_->Busy()) {
        exit = true;
      } else if (stop_by_ == absl::InfiniteFuture()) {
        stop_by_ = now + core_.options().stall_timeout;
      } else if (now >= stop_by_) {
        abandon_ = true;
      }
    }
    if (!exit && !broken_) {
      next = core_.TakeChunk(lane_, now,
                             [this](const TransferRecord& r) { return chunks_->Fits(r); });
    }
    if (!next) wake = std::min(core_.NextWake(lane_, now), stop_by_);
  }
  chunks_->ClearOutcomes();  // Outside the lock: a record's last reference may go here.
  if (exit) return false;
  if (next) {
    chunks_->Issue(std::move(*next));
    chunks_->CountDmaTime(clock_.Now());
    return true;
  }
  // A broken lane sleeps once it has dropped all its device held: the core
  // failed its transfers and refuses new ones, so only Stop (which wakes
  // it) is left. It used to turn without pause, a core's worth of CPU.
  const bool dropping = broken_ && chunks_->Busy();
  if (!abandon_ && !look_again && !dropping) waker()->WaitUntil(clock_, wake);
  return true;
}

}  // namespace memd::transfer
