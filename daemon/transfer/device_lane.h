#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/backend/copy_device.h"
#include "daemon/transfer/chunk_pipeline.h"
#include "daemon/transfer/engine_core.h"
#include "daemon/transfer/lane.h"

namespace memd::transfer {

/// One device's progress thread. At each chunk boundary it takes in what
/// the device finished, tells the engine, lets it end what must end (a
/// broken device, a stop), asks it which transfer moves next and hands that
/// chunk to its ChunkPipeline, which owns the streams, the staging ring and
/// the chunks in flight. It sleeps until Submit, Cancel or a reached marker
/// wakes it, or the engine's next deadline. Stopping, it waits up to
/// stall_timeout for the device to finish what it holds, then abandons it.
/// Owns its thread and pipeline. Thread-safe (Lane); everything else is its
/// thread's.
class DeviceLane : public Lane {
 public:
  // Allocates the pipeline. Errors: the device's.
  static absl::StatusOr<std::unique_ptr<DeviceLane>> Create(EngineCore& core, int index);
  ~DeviceLane() override;

 protected:
  void Run() override;

 private:
  DeviceLane(EngineCore& core, int index);

  bool Step();

  EngineCore& core_;
  const Clock& clock_;  // The engine's: DMA time, stalls, the stop bound, naps.
  const int index_;
  const LaneIndex lane_;
  backend::CopyDevice& device_;
  std::unique_ptr<ChunkPipeline> chunks_;
  bool broken_ = false;  // The device reported a sticky error.
  absl::Status broken_status_;
  bool abandon_ = false;  // Stopping, and the GPU kept chunks too long.
  absl::Time stop_by_ = absl::InfiniteFuture();  // Abandon the GPU's chunks then.
};

}  // namespace memd::transfer
