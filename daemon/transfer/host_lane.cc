#include "daemon/transfer/host_lane.h"

#include <optional>

namespace memd::transfer {

void HostLane::Run() {
  while (true) {
    std::optional<Chunk> chunk;
    absl::Time wake;
    {
      CoreLock lock(core_);
      const absl::Time now = core_.clock().Now();
      core_.Sweep(kHostLane, now);
      if (stopping() && core_.LaneIdle(kHostLane)) return;
      chunk = core_.TakeChunk(kHostLane, now, [](const TransferRecord&) { return true; });
      if (!chunk) wake = core_.NextWake(kHostLane, now);
    }
    if (!chunk) {
      waker()->WaitUntil(core_.clock(), wake);
      continue;
    }
    const TransferRecord& record = *chunk->record;
    copy_.Copy(record.destination.memory.host + chunk->offset,
               record.source.memory.host + chunk->offset, chunk->bytes);
    CoreLock lock(core_);
    core_.ChunkDone(*chunk, core_.clock().Now());
  }
}

}  // namespace memd::transfer
