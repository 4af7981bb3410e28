#pragma once

#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "daemon/transfer/transfer_record.h"

namespace memd::transfer {

/// One lane's unfinished transfers, and which of them moves the next chunk:
/// the lowest effective class (critical 0 .. background 2, less one class
/// per `ageing` waited since the transfer's last chunk), then the longest
/// waiting. So at each chunk boundary critical goes before normal before
/// background, equal classes take turns, and a starved transfer rises until
/// it gets a chunk. Transfers still behind an earlier overlapping one
/// (blockers), cancelled or without a chunk due are passed over.
/// Thread-compatible: the engine calls it under its mutex.
class Scheduler {
 public:
  explicit Scheduler(absl::Duration ageing) : ageing_(ageing) {}

  void Add(RecordPtr record) { records_.push_back(std::move(record)); }
  // Forgets the transfers that ended.
  void DropTerminal();
  const std::vector<RecordPtr>& records() const { return records_; }

  // Cuts the next chunk of the transfer to serve among those `fits` accepts
  // (the lane has a stream and a slot for it), and counts it in flight.
  // nullopt when none can move now.
  std::optional<Chunk> Next(absl::Time now,
                            absl::FunctionRef<bool(const TransferRecord&)> fits);

  // When the earliest retry falls due (InfiniteFuture when none waits).
  absl::Time NextRetry() const;

  int EffectiveClass(const TransferRecord& record, absl::Time now) const;

 private:
  static bool ChunkDue(const TransferRecord& record, absl::Time now);

  absl::Duration ageing_;
  std::vector<RecordPtr> records_;
};

}  // namespace memd::transfer
