#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/copy_device.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

struct EngineOptions {
  // Default chunk: what one staging slot holds and one DMA moves.
  std::uint64_t chunk_bytes = std::uint64_t{4} << 20;
  // Staging slot size: the largest chunk a transfer may ask for.
  std::uint64_t slot_bytes = std::uint64_t{16} << 20;
  // Pinned staging slots per device (the ring depth). 1 serialises filling
  // and DMA (the control of the overlap measurement).
  int staging_slots = 4;
  // CPU threads that fill and drain staging slots, per device (1..4).
  int copy_threads = 2;
  // Chunks queued on the GPU per stream at most: priorities are the
  // engine's, so little may wait where it cannot reorder.
  int chunks_in_flight = 2;
  // Admission: bytes of unfinished transfers, per session, per uid (all
  // its sessions together) and in all.
  std::uint64_t max_session_bytes = std::uint64_t{64} << 30;
  std::uint64_t max_uid_bytes = std::uint64_t{64} << 30;
  std::uint64_t max_total_bytes = std::uint64_t{256} << 30;
  // Unfinished transfers per session and per uid.
  int max_session_transfers = 256;
  int max_uid_transfers = 1024;
  // Watches (WaitTransfer calls) waiting at once per session: each holds
  // memory in the daemon until its transfer ends (the daemon sets it to
  // max_waits_per_session).
  int max_session_watches = 256;
  // Finished transfers a session can still ask about (oldest forgotten).
  int kept_finished_per_session = 64;
  // No chunk of a running transfer finished for this long: DEADLINE_EXCEEDED.
  absl::Duration stall_timeout = absl::Seconds(30);
  // A waiting transfer rises one priority class per this much waiting.
  absl::Duration ageing = absl::Milliseconds(200);
  // Chunk turns in a row critical copies may take on a lane while a copy of
  // lower priority could move there: 3 leaves it at least 1 of every 4.
  int max_critical_run = 3;
  // Transient failures of one chunk are retried this many times, with
  // exponential backoff from retry_backoff and jitter, within the deadline.
  int max_retries = 5;
  absl::Duration retry_backoff = absl::Milliseconds(1);
};

// Counters since start and levels now (EngineStats).
struct FlowStats {
  Direction direction = Direction::kHostToHost;
  int device = -1;
  std::uint64_t bytes = 0;      // Moved by finished chunks.
  std::uint64_t transfers = 0;  // Finished successfully.
};

struct PriorityStats {
  Priority priority = Priority::kNormal;
  std::uint64_t queued = 0;           // Waiting for their first chunk, now.
  std::uint64_t started = 0;          // Transfers that got their first chunk.
  double wait_seconds = 0;            // Their waits, summed.
};

struct DeviceStats {
  int device = 0;
  absl::Status health;  // OK, or the sticky error that broke it.
  int slots = 0;        // Staging ring size.
  int slots_in_use = 0;
  double staging_seconds = 0;  // CPU time filling and draining slots.
  double dma_seconds = 0;      // Time some DMA of this device was running.
};

struct EngineStats {
  std::vector<FlowStats> flows;  // Per direction and device seen.
  std::vector<PriorityStats> priorities;  // One per priority.
  std::vector<DeviceStats> devices;
  std::map<DataPath, std::uint64_t> paths;     // Transfers started, by path.
  std::map<FailureReason, std::uint64_t> failures;  // By reason, those seen.
  std::uint64_t retries = 0;
  std::uint64_t active_transfers = 0;   // Unfinished, now.
  std::uint64_t active_bytes = 0;       // Their bytes, now (admission).
  std::uint64_t admission_rejections = 0;
  // The same refusals by the config key of the limit that refused them
  // ("transfer_max_uid_bytes", ...).
  std::map<std::string, std::uint64_t> admission_rejections_by_limit;
};

/// Moves bytes between host and device memory the daemon reaches, in chunks
/// through per-device rings of pinned staging slots, pipelined so that
/// filling one slot overlaps the DMA of the previous one. Owns the copy
/// devices, their staging rings and streams, one progress thread per device
/// (and one for host-to-host copies), and the record of every unfinished
/// transfer and of each session's last finished ones. Every time it keeps
/// (deadlines, retries, stalls, ageing, the times a progress shows, the
/// staging and DMA seconds) and every wait of its threads is the clock's
/// it is given, which it borrows. Thread-safe.
class Engine {
 public:
  // Allocates every device's staging ring and streams now (never per
  // transfer). `devices` may be empty: then only host-to-host copies run.
  // `clock` must outlive the engine; tests give a fake one.
  // Errors: INVALID_ARGUMENT (options out of range, with the numbers),
  // the devices' errors (RESOURCE_EXHAUSTED for staging memory).
  static absl::StatusOr<std::unique_ptr<Engine>> Start(
      std::vector<std::unique_ptr<backend::CopyDevice>> devices, EngineOptions options,
      const Clock& clock = RealClock::Default());
  // Cancels every transfer, waits for chunks on the GPUs, stops the threads.
  ~Engine();

  // Checks and queues a copy; returns its id at once. Errors, all synchronous
  // and never retried: INVALID_ARGUMENT (lengths differ or are 0, chunk size
  // out of range, memory the engine cannot reach), FAILED_PRECONDITION (the
  // device is unhealthy: the message says why), RESOURCE_EXHAUSTED (the
  // session's, the uid's or the daemon's bytes or transfers in flight, with
  // the numbers and the limit's config key).
  absl::StatusOr<TransferId> Submit(TransferSpec spec);

  // NOT_FOUND when the session has no such transfer (never another's).
  absl::StatusOr<TransferProgress> Progress(SessionId session, TransferId id) const;

  // Calls `done` once with the final progress when the transfer ends: at
  // once on this thread if it has ended, else on an engine thread (it must
  // not block). Returns a token for CancelWatch. NOT_FOUND as Progress;
  // RESOURCE_EXHAUSTED when the session has max_session_watches waiting.
  using Done = std::function<void(const TransferProgress&)>;
  absl::StatusOr<std::uint64_t> Watch(SessionId session, TransferId id, Done done);
  // After it returns, the watch's `done` does not run (unless running now:
  // then it returns when it has). False when it ran or is unknown.
  bool CancelWatch(std::uint64_t watch);

  // Stops the transfer at the next chunk boundary: chunks already on the
  // GPU finish, then it ends CANCELLED (already ended: unchanged). Returns
  // the progress as of the call. NOT_FOUND as Progress.
  absl::StatusOr<TransferProgress> Cancel(SessionId session, TransferId id);

  // A session ended: cancels its transfers, waits up to `drain` for their
  // chunks on the GPUs and for what they held (Endpoint::hold, pin) to be
  // let go, and forgets them. Called before its leases go.
  void EndSession(SessionId session, absl::Duration drain);

  // The buffer `buffer_id` (Endpoint::buffer_id) was freed: nobody can read
  // it any more, so every unfinished transfer writing it is cancelled (as
  // Cancel: chunks on a GPU finish first), whichever session started it.
  void CancelWritesTo(std::uint64_t buffer_id);

  // The session's transfers that may still write `buffer_id`: unfinished,
  // or ended with chunks still on a device. By id.
  std::vector<TransferId> WritersOf(SessionId session, std::uint64_t buffer_id) const;

  EngineStats Stats() const;
  // What `uid` has unfinished now, all its sessions together (what
  // admission counts against max_uid_*); cheap: one lookup.
  TransferActivity UidActivity(uid_t uid) const;

  // A new max_session_watches (a reload): watches waiting beyond it stay;
  // new ones are refused until fewer wait. INVALID_ARGUMENT below 1.
  absl::Status SetMaxSessionWatches(int most);

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memd::transfer
