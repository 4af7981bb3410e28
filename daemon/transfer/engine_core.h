#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/opaque_ids.h"
#include "daemon/backend/copy_device.h"
#include "daemon/transfer/admission.h"
#include "daemon/transfer/engine_types.h"
#include "daemon/transfer/lane.h"
#include "daemon/transfer/range_order.h"
#include "daemon/transfer/retry_backoff.h"
#include "daemon/transfer/scheduler.h"
#include "daemon/transfer/transfer_record.h"
#include "daemon/transfer/watch_list.h"

namespace memd::transfer {

// What a device lane measures, read by Stats without the engine's mutex.
struct DeviceCounters {
  std::atomic<int> slots{0};
  std::atomic<int> slots_in_use{0};
  std::atomic<std::int64_t> staging_ns{0};
  std::atomic<std::int64_t> dma_ns{0};
};

/// The engine's shared state behind one mutex: every transfer record, the
/// lanes' schedulers, sessions and their finished records, admission,
/// range order, watches and counters. It decides what happens to a
/// transfer (next chunk, done, retry, failed, cancelled, timed out); the
/// lanes move the bytes without holding the mutex. Callbacks of watches
/// and lane wakes that a change produces run after the mutex is released
/// (CoreLock). Every time it reads or waits for is the injected clock's,
/// and so is every time its lanes read or wait for: a test's fake clock
/// decides when a deadline, a retry, a stall or an ageing period comes.
/// Borrows the devices and the clock (both outlive it). Thread-safe.
class EngineCore {
 public:
  EngineCore(const EngineOptions& options, std::vector<backend::CopyDevice*> devices,
             const Clock& clock);

  const EngineOptions& options() const { return options_; }
  const Clock& clock() const { return clock_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  backend::CopyDevice& device(int index) const { return *devices_[index]; }
  DeviceCounters& counters(int index) { return *counters_[index]; }
  // The lanes to wake, by LaneIndex; set once before the first Submit.
  void SetLanes(std::vector<Lane*> lanes) { lanes_ = std::move(lanes); }

  // Engine's calls (see engine.h); they take the mutex themselves.
  absl::StatusOr<TransferId> Submit(RecordPtr record);
  absl::StatusOr<TransferProgress> Progress(SessionId session, TransferId id) const;
  absl::StatusOr<std::uint64_t> Watch(SessionId session, TransferId id, TransferDone done);
  bool CancelWatch(std::uint64_t token);
  absl::StatusOr<TransferProgress> Cancel(SessionId session, TransferId id);
  void EndSession(SessionId session, absl::Duration drain);
  void CancelAll(FailureReason reason);
  void CancelWritesTo(std::uint64_t buffer_id);
  std::vector<TransferId> WritersOf(SessionId session, std::uint64_t buffer_id) const;
  TransferListing List(std::optional<uid_t> only, std::size_t most) const;
  EngineStats Stats() const;
  TransferActivity UidActivity(uid_t uid) const;
  void SetMaxSessionWatches(int most);
  // OK, or the sticky error device `index` reported (recorded by its lane,
  // or reported by the device now): what Stats shows.
  absl::Status DeviceHealth(int index) const;

  // The lanes' side, under mu() (hold a CoreLock).
  absl::Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // The next chunk this lane should move among transfers `fits` accepts.
  std::optional<Chunk> TakeChunk(LaneIndex lane, absl::Time now,
                                 absl::FunctionRef<bool(const TransferRecord&)> fits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // As TakeChunk, but only a critical transfer's chunk, and only when it is
  // the one TakeChunk would give (Scheduler::NextCritical): for a lane
  // between the pieces of another class's staging.
  std::optional<Chunk> TakeCriticalChunk(LaneIndex lane, absl::Time now,
                                         absl::FunctionRef<bool(const TransferRecord&)> fits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many critical transfers were submitted so far, read without the
  // lock: a lane in the middle of staging looks for them only when it
  // changed (or while it has critical chunks on the device).
  std::uint64_t critical_submits() const {
    return critical_submits_.load(std::memory_order_acquire);
  }
  // The chunk's bytes are in the destination.
  void ChunkDone(const Chunk& chunk, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunk failed with `error` (the device's, naming the call): retried
  // after a backoff when transient and allowed, else the transfer fails.
  void ChunkFailed(const Chunk& chunk, const absl::Status& error, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The device reported a sticky error: every transfer on or to it fails.
  void FailDevice(int index, const absl::Status& sticky) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the lane's transfers that were cancelled and hold no chunk, and
  // those past their deadline or stalled. Call after taking completions in,
  // so that a finished transfer is never declared timed out.
  void Sweep(LaneIndex lane, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the lane must look again at the latest: a deadline, a stall or a
  // retry falling due.
  absl::Time NextWake(LaneIndex lane, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No unfinished transfer is left on the lane.
  bool LaneIdle(LaneIndex lane) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Releases mu() and then runs what the changes made under it produced.
  void UnlockAndRunDeferred() ABSL_UNLOCK_FUNCTION(mu_);

 private:
  struct SessionRecords {
    absl::flat_hash_map<TransferId, RecordPtr> transfers;  // Unfinished and kept.
    std::deque<TransferId> finished;  // Oldest first.
  };
  struct Firing {
    std::uint64_t token;
    TransferDone done;
    TransferProgress progress;
  };

  RecordPtr Find(SessionId session, TransferId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::Status NotFound(SessionId session, TransferId id);
  // FAILED_PRECONDITION naming device `index` and the sticky error that
  // broke it: the one text for a refused copy and a failed transfer.
  absl::Status Unhealthy(int index, const absl::Status& sticky) const;
  // Ends the transfer in `state`: done (no reason), or failed or cancelled
  // for `reason` (counted in Stats).
  void Finish(TransferRecord& record, TransferState state, absl::Status status,
              std::optional<FailureReason> reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LetGoOnceDrained(TransferRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(TransferRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequestCancel(TransferRecord& record, FailureReason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SessionDrained(SessionId session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(const TransferRecord& record) const;
  // A chunk a lane took starts its transfer if it was queued.
  void Started(TransferRecord& record, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EngineOptions options_;
  const std::vector<backend::CopyDevice*> devices_;
  const Clock& clock_;
  std::vector<std::unique_ptr<DeviceCounters>> counters_;
  std::vector<Lane*> lanes_;

  std::atomic<std::uint64_t> critical_submits_{0};
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // A chunk or a transfer ended, a watch ran.
  // Ids that say nothing of other sessions' copies (common/opaque_ids.h).
  OpaqueIds ids_ ABSL_GUARDED_BY(mu_);
  std::vector<Scheduler> schedulers_ ABSL_GUARDED_BY(mu_);  // By LaneIndex.
  absl::flat_hash_map<SessionId, SessionRecords> sessions_ ABSL_GUARDED_BY(mu_);
  Admission admission_ ABSL_GUARDED_BY(mu_);
  RangeOrder range_order_ ABSL_GUARDED_BY(mu_);
  WatchList watches_ ABSL_GUARDED_BY(mu_);
  int max_session_watches_ ABSL_GUARDED_BY(mu_);  // options_'s until a reload.
  std::vector<absl::Status> unhealthy_ ABSL_GUARDED_BY(mu_);  // By device index.
  // Produced under the mutex, run after it (UnlockAndRunDeferred).
  std::vector<Firing> deferred_watches_ ABSL_GUARDED_BY(mu_);
  std::vector<LaneIndex> deferred_wakes_ ABSL_GUARDED_BY(mu_);
  // What drained transfers kept their memory with: let go after the mutex
  // too (the last pin of a freed buffer gives its allocation to its pool).
  struct LetGo {
    pool::SegmentHold hold;
    std::shared_ptr<const void> pin;
    std::function<void()> written;
  };
  std::vector<LetGo> deferred_let_go_ ABSL_GUARDED_BY(mu_);
  // Threads letting go of what they took from deferred_let_go_ now.
  int letting_go_ ABSL_GUARDED_BY(mu_) = 0;
  // Watches whose callbacks run now, and on which thread.
  absl::flat_hash_map<std::uint64_t, std::thread::id> firing_ ABSL_GUARDED_BY(mu_);
  RetryBackoff backoff_ ABSL_GUARDED_BY(mu_);

  // Counters since start (Stats).
  std::map<std::pair<Direction, int>, FlowStats> flows_ ABSL_GUARDED_BY(mu_);
  PriorityStats priority_stats_[kPriorities] ABSL_GUARDED_BY(mu_);
  std::map<DataPath, std::uint64_t> paths_ ABSL_GUARDED_BY(mu_);
  std::map<FailureReason, std::uint64_t> failures_ ABSL_GUARDED_BY(mu_);
  std::uint64_t retries_ ABSL_GUARDED_BY(mu_) = 0;
};

// Holds the engine's mutex; on release runs the watches and wakes the
// lanes that the changes made under it produced.
class ABSL_SCOPED_LOCKABLE CoreLock {
 public:
  explicit CoreLock(EngineCore& core) ABSL_EXCLUSIVE_LOCK_FUNCTION(core.mu()) : core_(core) {
    core_.mu().Lock();
  }
  ~CoreLock() ABSL_UNLOCK_FUNCTION() { core_.UnlockAndRunDeferred(); }
  CoreLock(const CoreLock&) = delete;
  CoreLock& operator=(const CoreLock&) = delete;

 private:
  EngineCore& core_;
};

}  // namespace memd::transfer
