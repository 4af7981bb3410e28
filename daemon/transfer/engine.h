#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/copy_device.h"
#include "daemon/transfer/engine_types.h"
#include "daemon/transfer/types.h"

namespace memd::transfer {

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
  using Done = TransferDone;
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

  // The unfinished transfers of `only` (every uid's when unset), oldest
  // first, at most `most` of them, and how many more there are. A snapshot
  // taken under the engine's mutex in one pass over the lanes' transfers;
  // what it copies out is sorted and formatted after the mutex.
  TransferListing List(std::optional<uid_t> only, std::size_t most) const;

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
