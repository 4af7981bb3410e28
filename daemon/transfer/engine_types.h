#pragma once

// The transfer engine's vocabulary: its options, its statistics and the
// callback a watch runs. Engine (engine.h) is the front; the engine's own
// rooms (engine_core, plan, watch_list) include this, not the front.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

// The most copy threads per device: one thread's memcpy moves 8-9 GB/s on
// the H200 machine (docs/benchmarks.md), so 16 cover a PCIe Gen5 x16 link
// twice over.
inline constexpr int kMaxCopyThreads = 16;

// Copy threads per device when the operator does not say: as many as a
// staged pageable copy needs to keep a PCIe Gen5 link busy (~7 at 8-9 GB/s
// each) where the CPUs allow it, half of `usable_cpus` (the rest serve
// clients, the other lanes and the host copies), at least 2, at most 8.
int DefaultCopyThreads(int usable_cpus);

// Called once with a transfer's final progress (Engine::Watch).
using TransferDone = std::function<void(const TransferProgress&)>;

struct EngineOptions {
  // Default chunk: what one staging slot holds and one DMA moves.
  std::uint64_t chunk_bytes = std::uint64_t{4} << 20;
  // Staging slot size: the largest chunk a transfer may ask for.
  std::uint64_t slot_bytes = std::uint64_t{16} << 20;
  // Pinned staging slots per device (the ring depth). 1 serialises filling
  // and DMA (the control of the overlap measurement).
  int staging_slots = 4;
  // CPU threads that fill and drain staging slots, per device
  // (1..kMaxCopyThreads); the daemon's default is DefaultCopyThreads.
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

}  // namespace memd::transfer
