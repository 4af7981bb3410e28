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

/// One device's chunks from issue to end, for its DeviceLane: a stream into
/// the device (host to device, device to device), a stream out of it (device
/// to host, and the first leg of a copy to another device), the same pair
/// again for critical copies alone, one stream on each other device for the
/// second leg of those, the staging ring and the copy threads. It keeps at
/// most chunks_in_flight chunks queued per stream: the GPU cannot reorder
/// what it holds, so a critical copy queued behind other chunks would wait
/// for them all; on its own stream it waits at most for the copy the GPU's
/// engine is moving. A ring of three slots or more keeps its last free slot
/// for critical copies. It fills a slot for pageable sources while the
/// previous chunk's DMA runs, polls markers in order, and drains a
/// device-to-host slot into the destination only once its marker is
/// reached. Chunks that end wait in a list until the lane reports them to
/// the engine (ReportOutcomes), except while another class's fill or drain
/// lets critical chunks in (Stage, LetCriticalIn): that reports them, and
/// issues the chunks of critical transfers submitted meanwhile.
///
/// Owns its streams, ring and copy threads (the staging memory is the
/// device's). Not thread-safe: the lane's thread alone uses it; the streams'
/// wake callbacks touch only the shared Waker. Errors are the device's,
/// reported per chunk to the engine, never returned, but by Create.
class ChunkPipeline {
 public:
  // Allocates the ring and the streams; a reached marker wakes `waker`.
  // Errors: the device's.
  static absl::StatusOr<std::unique_ptr<ChunkPipeline>> Create(EngineCore& core, int index,
                                                               std::shared_ptr<Waker> waker);
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;
  // Waits for what the streams were given (their destructors do).
  ~ChunkPipeline();

  // Whether the record's next chunk can be issued now: room on its stream,
  // and a slot if it needs one. The engine asks while choosing.
  bool Fits(const TransferRecord& record);
  // Fills a slot if it must and queues the chunk's first leg; a refusal of
  // the device ends the chunk (an outcome).
  void Issue(Chunk chunk);
  // Takes in what the device finished, queue by queue. True when it left
  // finished chunks for the next turn (PollQueue says why): look again
  // before sleeping.
  bool Poll();
  // Gives up every chunk on a stream with `why`: the device broke, or the
  // engine stops and the device never finished.
  void DropAll(const absl::Status& why);
  // Some chunk is queued on a device.
  bool Busy() const;
  // DMA time: while some chunk is queued on a device, as the lane sees it
  // (rounded up to when it looks).
  void CountDmaTime(absl::Time now);
  // Tells the engine of the chunks that ended since it last heard (hold a
  // CoreLock; ClearOutcomes after it, outside the lock).
  void ReportOutcomes(absl::Time now);
  // A record's last reference may go here: not under the engine's lock.
  void ClearOutcomes() { outcomes_.clear(); }

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

  ChunkPipeline(EngineCore& core, int index, StagingRing ring, std::shared_ptr<Waker> waker);

  static bool NeedsSlot(const TransferRecord& record);
  static bool IntoDevice(const TransferRecord& record);
  Queue& QueueFor(const TransferRecord& record);
  absl::Status Enqueue(const Chunk& chunk, int slot, Queue& queue);
  void Record(Queue& queue, InFlight entry);
  bool PollQueue(Queue& queue);
  // True when it drained a slot into host memory (CPU time spent).
  bool Complete(InFlight& done);
  void Stage(std::byte* to, const std::byte* from, std::uint64_t bytes,
             const TransferRecord& record, Stores stores);
  // Between pieces of another class's staging: takes in the critical
  // chunks the device finished, and issues those of waiting critical
  // transfers, when one was submitted since it last looked or some are on
  // the device.
  void LetCriticalIn();
  void Drop(Queue& queue, const absl::Status& why);
  void ReleaseSlot(InFlight& entry);
  void Fail(InFlight& entry, absl::Status status, bool enqueued, Queue& queue);
  void Succeed(InFlight& entry);

  EngineCore& core_;
  const Clock& clock_;  // The engine's: staging and DMA time.
  const int index_;
  const LaneIndex lane_;
  DeviceCounters& counters_;
  const std::shared_ptr<Waker> waker_;
  StagingRing ring_;
  CopyThreads copy_;
  Queue in_;
  Queue out_;
  Queue critical_in_;
  Queue critical_out_;
  std::vector<Queue> peers_;       // By device index; none for this device.
  std::vector<Queue*> queues_;     // All of the above, to poll or drop.
  std::vector<Outcome> outcomes_;  // Chunks ended since the engine last heard.
  absl::Time busy_since_ = absl::InfinitePast();  // Some DMA queued since.
  bool staging_ = false;  // In Stage: one let in stages on this thread alone.
  std::uint64_t critical_seen_ = 0;  // EngineCore::critical_submits when it last looked.
};

}  // namespace memd::transfer
