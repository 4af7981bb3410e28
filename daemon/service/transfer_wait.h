#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/service/waiting_call.h"
#include "daemon/transfer/engine.h"
#include "daemon/transfer/types.h"

namespace memd::service {

// The longest one WaitTransfer call may wait; a client that waits longer
// asks again (memd::Transfer::Wait loops), so that no call outlives its
// client's interest for long.
inline constexpr absl::Duration kMaxTransferWait = absl::Minutes(1);

/// One transfer of one session as a waiting call sees the engine.
/// EngineWatcher is the daemon's; tests put in their own to hold the end
/// back. Thread-safe.
class TransferWatcher {
 public:
  virtual ~TransferWatcher() = default;
  // As transfer::Engine::Watch, CancelWatch and Progress, for this transfer.
  virtual absl::StatusOr<std::uint64_t> Watch(transfer::Engine::Done done) = 0;
  virtual bool CancelWatch(std::uint64_t token) = 0;
  virtual absl::StatusOr<transfer::TransferProgress> Progress() = 0;
};

/// The engine's view of `session`'s transfer `id`. Borrows the engine.
class EngineWatcher final : public TransferWatcher {
 public:
  EngineWatcher(transfer::Engine& engine, transfer::SessionId session,
                transfer::TransferId id)
      : engine_(engine), session_(session), id_(id) {}
  absl::StatusOr<std::uint64_t> Watch(transfer::Engine::Done done) override {
    return engine_.Watch(session_, id_, std::move(done));
  }
  bool CancelWatch(std::uint64_t token) override { return engine_.CancelWatch(token); }
  absl::StatusOr<transfer::TransferProgress> Progress() override {
    return engine_.Progress(session_, id_);
  }

 private:
  transfer::Engine& engine_;
  const transfer::SessionId session_;
  const transfer::TransferId id_;
};

/// One WaitTransfer call that waits for its transfer to end, without
/// holding a thread: a watch in the engine, and an alarm for the end of the
/// wait. Events:
///   Ended      the engine's watch ran (the transfer ended): answer with its
///              final progress;
///   kAlarm     the wait ran out: answer with the progress now;
///   kCancelled the client cancelled the call: end it CANCELLED.
/// States: kStarting (Watch not returned yet; a cancel now is kept for
/// later), kWatching (a watch and an alarm are set), kDone (answered; later
/// events are ignored).
///
/// The watch and the alarm race: whichever takes the watch back
/// (CancelWatch) answers; when the watch cannot be taken back its end has
/// come or is on its way, and that answers. CancelWatch is never called
/// under the mutex, since it waits for a running watch, which takes it.
///
/// Owns its watcher; shared by the engine's watch (which keeps it alive
/// while it waits), the alarm and the call (which hold it weakly). Borrows
/// the Call until it ends it, exactly once. Thread-safe. Ends the call with
/// OK and a progress, or with the watcher's errors (NOT_FOUND) or CANCELLED.
class TransferWait : public std::enable_shared_from_this<TransferWait> {
 public:
  /// The call a wait answers: gRPC's in the daemon (MemdService), a fake in
  /// tests. Called with the wait's mutex held: must not call back.
  /// Its one alarm: kDeadline.
  class Call : public AlarmedCall {
   public:
    // Ends the call (and its alarm): with `progress` when `status` is OK.
    // Called once, last.
    virtual void End(const absl::Status& status,
                     const transfer::TransferProgress* progress) = 0;
  };

  enum class State { kStarting, kWatching, kDone };
  enum class Event { kAlarm, kCancelled };

  // Make it with std::make_shared, then Start.
  TransferWait(std::unique_ptr<TransferWatcher> watcher, absl::Duration wait, Call& call);

  // Sets the watch and the alarm; the call may have ended when it returns.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void On(Event event) ABSL_LOCKS_EXCLUDED(mu_);
  State state() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Ended(const transfer::TransferProgress& progress) ABSL_LOCKS_EXCLUDED(mu_);
  void EndLocked(const absl::Status& status, const transfer::TransferProgress* progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<TransferWatcher> watcher_;
  const absl::Duration wait_;

  mutable absl::Mutex mu_;
  Call& call_ ABSL_GUARDED_BY(mu_);  // Not touched once kDone.
  State state_ ABSL_GUARDED_BY(mu_) = State::kStarting;
  std::uint64_t token_ ABSL_GUARDED_BY(mu_) = 0;  // The watch, from kWatching.
  bool cancel_pending_ ABSL_GUARDED_BY(mu_) = false;  // Cancelled in kStarting.
};

}  // namespace memd::service
