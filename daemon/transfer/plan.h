#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "daemon/transfer/engine_types.h"
#include "daemon/transfer/transfer_record.h"

namespace memd::transfer {

// Checks a copy before it is queued and decides how it moves: direction,
// data path, the lane (device) that moves it, the chunk size. `ordinals`
// are the engine's devices' ordinals, by device index. Errors, all
// INVALID_ARGUMENT with the numbers: a zero or unequal length, a chunk size
// outside 1 MiB .. slot_bytes, an endpoint the engine cannot reach (host
// memory not mapped, a device it does not drive), a range that wraps, a
// copy onto an overlapping range of its own buffer. The record's id and
// progress are the engine's to fill.
absl::StatusOr<RecordPtr> PlanTransfer(TransferSpec spec, const EngineOptions& options,
                                       const std::vector<int>& ordinals);

}  // namespace memd::transfer
