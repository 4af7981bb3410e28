#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "daemon/transfer/transfer_record.h"

namespace memd::transfer {

/// One lane's unfinished transfers, and which of them moves the next chunk:
/// the lowest effective class (critical 0 .. background 2, less one class
/// per `ageing` waited since the transfer's last chunk); within it the uid
/// this lane served least recently (a uid new to the lane, or back after
/// its transfers ended, first), then that uid's longest-waiting transfer,
/// then the lowest id. So at each chunk boundary critical goes before
/// normal before background, uids take turns within a class whatever
/// number of transfers each keeps runnable, a uid's transfers take turns
/// among themselves, and a starved transfer rises until it gets a chunk.
/// While a transfer of lower base priority could move, base-critical
/// transfers take at most `max_critical_run` turns in a row and the next
/// goes to the best of the others (3: at most 3 of every 4), so that no
/// flood of critical copies shuts the rest out. Transfers still behind an
/// earlier overlapping one (blockers), cancelled or without a chunk due are
/// passed over.
/// Thread-compatible: the engine calls it under its mutex.
class Scheduler {
 public:
  // `max_critical_run` is EngineOptions::max_critical_run.
  Scheduler(absl::Duration ageing, int max_critical_run)
      : ageing_(ageing), max_critical_run_(max_critical_run) {}

  void Add(RecordPtr record);
  // Forgets the transfers that ended.
  void DropTerminal();
  const std::vector<RecordPtr>& records() const { return records_; }

  // Cuts the next chunk of the transfer to serve among those `fits` accepts
  // (the lane has a stream and a slot for it), and counts it in flight.
  // nullopt when none can move now.
  std::optional<Chunk> Next(absl::Time now,
                            absl::FunctionRef<bool(const TransferRecord&)> fits);
  // As Next, but only if the transfer Next would serve is a base-critical
  // one: a lane busy filling or draining another class's slot lets such a
  // chunk in between pieces (ChunkPipeline::Stage). nullopt, and nothing
  // counted, when Next would serve another (or none).
  std::optional<Chunk> NextCritical(absl::Time now,
                                    absl::FunctionRef<bool(const TransferRecord&)> fits);

  // When the earliest retry falls due (InfiniteFuture when none waits).
  absl::Time NextRetry() const;

  int EffectiveClass(const TransferRecord& record, absl::Time now) const;

 private:
  // A uid's place in the turns: the last turn it got (0: none yet), and
  // how many of its transfers the lane holds (forgotten at none).
  struct UidTurns {
    std::uint64_t last_turn = 0;
    int records = 0;
  };

  static bool ChunkDue(const TransferRecord& record, absl::Time now);
  // Next's choice, or nullptr; sets *others_could_move when a transfer
  // below critical could have moved.
  const RecordPtr* Choose(absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits,
                          bool* others_could_move) const;
  // Counts the turn and cuts the chunk of the chosen transfer.
  Chunk Serve(const RecordPtr& chosen, bool others_could_move, absl::Time now);
  static Chunk Cut(const RecordPtr& record, absl::Time now);

  absl::Duration ageing_;
  int max_critical_run_;
  std::vector<RecordPtr> records_;
  absl::flat_hash_map<uid_t, UidTurns> uids_;
  std::uint64_t turns_ = 0;     // Chunks served so far.
  int critical_run_ = 0;        // Critical turns in a row while others could move.
};

}  // namespace memd::transfer
