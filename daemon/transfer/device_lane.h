#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/backend/copy_device.h"
#include "daemon/transfer/chunk_fifo.h"
#include "daemon/transfer/copy_threads.h"
#include "daemon/transfer/engine_core.h"
#include "daemon/transfer/lane.h"
#include "daemon/transfer/staging_ring.h"

namespace memd::transfer {

/// One device's progress thread and what it drives: a stream into the
/// device (host to device, device to device), a stream out of it (device to
/// host, and the first leg of a copy to another device), the same pair again
/// for critical copies alone, one stream on each other device for the
/// second leg of those, the staging ring and the copy threads. At each chunk
/// boundary it asks the engine which transfer moves next and keeps at most
/// chunks_in_flight chunks queued per stream: the GPU cannot reorder what
/// it holds, so a critical copy queued behind other chunks would wait for
/// them all; on its own stream it waits at most for the copy the GPU's
/// engine is moving. A ring of three slots or more keeps its last free slot
/// for critical copies. The lane fills a slot for pageable sources while
/// the previous chunk's DMA runs, polls markers in order, and drains a
/// device-to-host slot into the destination only once its marker is
/// reached. It sleeps until Submit, Cancel or a WakeWhenDone callback wakes
/// it, or a short nap ends. Owns its streams and thread; the staging memory
/// is the device's. Thread-safe (Lane); everything else is its thread's.
class DeviceLane : public Lane {
 public:
  // Allocates the ring and the streams. Errors: the device's.
  static absl::StatusOr<std::unique_ptr<DeviceLane>> Create(EngineCore& core, int index);
  ~DeviceLane() override;

 protected:
  void Run() override;

 private:
  // Which queue a chunk waits in, and so what its marker means.
  enum class Leg {
    kIn,       // On in_: host or device to this device.
    kOut,      // On out_: this device to host, or to a slot for a peer.
    kPeerIn,   // On a peer stream: a slot to the other device.
  };
  struct InFlight {
    Chunk chunk;
    int slot = -1;
    backend::Marker marker = 0;
    Leg leg = Leg::kIn;
  };
  struct Queue {
    std::unique_ptr<backend::CopyStream> stream;
    ChunkFifo<InFlight> fifo;
    int device = -1;  // The engine's index of the stream's device.
  };
  struct Outcome {
    Chunk chunk;
    absl::Status status;
  };

  DeviceLane(EngineCore& core, int index, StagingRing ring);

  // The loop's steps (device_lane.cc).
  bool Step();
  bool PollQueue(Queue& queue);
  // Tells the engine of outcomes_ (hold a CoreLock; clear them after it).
  void ReportOutcomes(absl::Time now);
  void Drop(Queue& queue, const absl::Status& why);
  void ReleaseSlot(InFlight& entry);
  bool Busy() const;
  void CountDmaTime(absl::Time now);

  // One chunk's legs (device_chunks.cc).
  bool Fits(const TransferRecord& record);
  static bool NeedsSlot(const TransferRecord& record);
  Queue& QueueFor(const TransferRecord& record);
  static bool IntoDevice(const TransferRecord& record);
  void Issue(Chunk chunk);
  absl::Status Enqueue(const Chunk& chunk, int slot, Queue& queue);
  // True when it drained a slot into host memory (CPU time spent).
  bool Complete(InFlight& done);
  void Stage(std::byte* to, const std::byte* from, std::uint64_t bytes,
             const TransferRecord& record, Stores stores);
  void TakeInCriticalChunks();
  void Record(Queue& queue, InFlight entry);
  void Fail(InFlight& entry, absl::Status status, bool enqueued, Queue& queue);
  void Succeed(InFlight& entry);

  EngineCore& core_;
  const Clock& clock_;  // The engine's: DMA time, stalls, the stop bound, naps.
  const int index_;
  const LaneIndex lane_;
  backend::CopyDevice& device_;
  DeviceCounters& counters_;
  StagingRing ring_;
  CopyThreads copy_;
  Queue in_;
  Queue out_;
  Queue critical_in_;
  Queue critical_out_;
  std::vector<Queue> peers_;  // By device index; none for this device.
  std::vector<Queue*> queues_;  // All of the above, to poll or drop.
  std::vector<Outcome> outcomes_;  // Chunks ended since the engine last heard.
  bool broken_ = false;            // The device reported a sticky error.
  absl::Status broken_status_;
  bool abandon_ = false;           // Stopping, and the GPU kept chunks too long.
  absl::Time busy_since_ = absl::InfinitePast();  // Some DMA queued since.
  absl::Time stop_by_ = absl::InfiniteFuture();   // Abandon the GPU's chunks then.
};

}  // namespace memd::transfer
