#pragma once

// One transfer as the engine keeps it: what was asked (fixed at Submit) and
// how far it got (guarded by the engine's mutex, EngineCore::mu()).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

// Which progress thread moves a transfer: 0 is the host lane (host to host),
// 1 + i the lane of the engine's i-th copy device.
using LaneIndex = int;
inline constexpr LaneIndex kHostLane = 0;
inline constexpr LaneIndex DeviceLaneOf(int device) { return device + 1; }

// A chunk to move again after a transient failure, not before `not_before`.
struct ChunkRedo {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  int attempt = 0;
  absl::Time not_before;
};

struct TransferRecord {
  // Fixed at Submit; read without the lock.
  TransferId id = 0;
  SessionId session = 0;
  uid_t uid = 0;
  Endpoint source;
  Endpoint destination;
  Priority priority = Priority::kNormal;
  absl::Time deadline = absl::InfiniteFuture();
  std::uint64_t chunk_bytes = 0;
  Direction direction = Direction::kHostToHost;
  DataPath path = DataPath::kNone;
  // The lane's device index (engine order, not ordinal) moving the bytes,
  // and for device-to-device copies the destination's; -1 for none.
  int device_index = -1;
  int peer_index = -1;
  LaneIndex lane = kHostLane;

  // Guarded by EngineCore::mu().
  TransferProgress progress;
  std::uint64_t next_offset = 0;   // First byte no chunk was issued for.
  std::vector<ChunkRedo> redo;     // Chunks to issue again.
  int in_flight = 0;               // Chunks issued and not yet finished.
  // It ended and its last chunk left the device: its ranges no longer hold
  // back later transfers, and its endpoints' hold and pin are let go.
  bool let_go = false;
  absl::Time waiting_since;        // Since its last chunk (ageing).
  absl::Time last_progress;        // Last chunk issued to an idle transfer or finished.
  bool cancel_requested = false;
  // Why it was cancelled: kCancelled, kSessionEnded, kDestinationFreed, kShutdown.
  FailureReason cancel_reason = FailureReason::kCancelled;
  int blockers = 0;                // Earlier overlapping transfers unfinished.
  std::vector<std::shared_ptr<TransferRecord>> dependents;  // Waiting on this.

  std::uint64_t total() const { return source.length; }
  bool terminal() const { return progress.terminal(); }
  bool has_work() const { return next_offset < total() || !redo.empty(); }
  std::uint64_t chunk_index(std::uint64_t offset) const { return offset / chunk_bytes; }
};

using RecordPtr = std::shared_ptr<TransferRecord>;

// A piece of one transfer being moved: bytes [offset, offset + bytes).
struct Chunk {
  RecordPtr record;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  int attempt = 0;  // 0 the first time; retries so far.
};

}  // namespace memd::transfer
