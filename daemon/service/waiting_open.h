#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/broker/broker.h"
#include "daemon/service/waiting_call.h"

namespace memd::service {

// A Create that waits for memory at a full location (Broker::CreateOrWait).
struct WaitForMemory : broker::CreateParams {};
// An OpenOrCreate that may wait for memory too (Broker::OpenOrCreateOrWait).
struct OpenOrCreateWaitingForMemory : broker::CreateParams {};
// An open at a location whose copy may wait for memory there
// (Broker::OpenOrWaitForMemory): Open and Prefetch with wait_for_memory_ms.
struct CopyWaitingForMemory : broker::OpenParams {};

// What an Open-like call asks of the broker, again at every wake: an Open
// (which waits only with READ, or for its copy), an OpenOrCreate, a Create
// waiting for memory, or either open waiting for memory as well.
using OpenRequest = std::variant<broker::OpenParams, broker::CreateParams, WaitForMemory,
                                 OpenOrCreateWaitingForMemory, CopyWaitingForMemory>;

// Asks the broker once: a grant, an error, or std::nullopt after leaving
// `wake` under `watch` (Broker::OpenOrWatch, Broker::OpenOrCreate). Without
// a wake it never waits.
absl::StatusOr<std::optional<broker::Grant>> AskBroker(
    broker::Broker& broker, broker::SessionId session, const OpenRequest& request,
    broker::WatchId watch, std::function<void()> wake);

/// The broker as one waiting open sees it. BrokerOpener is the daemon's;
/// tests put in their own to hold a wake back. Errors: the broker's.
class Opener {
 public:
  virtual ~Opener() = default;
  // One try: a grant, an error, or std::nullopt after leaving a watch whose
  // wake calls `woken` once (the name sealed, the session ended).
  virtual absl::StatusOr<std::optional<broker::Grant>> Try(
      std::function<void()> woken) = 0;
  // Takes back the watch the last try left. False when there is none: its
  // wake has run or is on its way.
  virtual bool CancelWatch() = 0;
  // What the call ends with when `wait` has passed; nullopt: the waiting
  // open's own DEADLINE_EXCEEDED (the buffer was not sealed in time).
  virtual std::optional<absl::Status> Overdue(absl::Duration wait) const {
    return std::nullopt;
  }
  // Whether the last try left the watch waiting for memory (not for a seal
  // or a copy).
  virtual bool WaitsForMemory() const { return false; }
};

/// Tries `request` for `session` with the broker, under one watch id for
/// every try. Borrows the broker. Thread-compatible (WaitingOpen serialises).
class BrokerOpener final : public Opener {
 public:
  BrokerOpener(broker::Broker& broker, broker::SessionId session, OpenRequest request);
  absl::StatusOr<std::optional<broker::Grant>> Try(std::function<void()> woken) override;
  bool CancelWatch() override;
  std::optional<absl::Status> Overdue(absl::Duration wait) const override;
  bool WaitsForMemory() const override { return waited_for_memory_; }

 private:
  broker::Broker& broker_;
  const broker::SessionId session_;
  const OpenRequest request_;
  const broker::WatchId watch_;
  // The last try left the watch waiting for memory (not for a seal): an
  // overdue OpenOrCreate says what was free then.
  bool waited_for_memory_ = false;
  // An open's try that left a watch found a buffer of its name (being
  // written, or one the caller may not read): an overdue open then says
  // the buffer was not sealed, else that there is none.
  bool found_name_ = false;
};

/// One Open or OpenOrCreate call that waits for its buffer to be sealed (or
/// for memory, or a copy), without holding a thread. A small state machine;
/// every transition is in On(), driven by four events:
///   kWake         the first try (Start), or the broker's wake (the name was
///                 sealed, memory came, or the session ended: its try then
///                 fails UNAUTHENTICATED): try again;
///   kAlarm        the deadline passed;
///   kMemoryAlarm  the memory wait passed (only with one): the call ends if
///                 it still waits for memory, and goes on if it waits for
///                 something else by then;
///   kCancelled    the client cancelled the call.
/// States, in the order a call goes through them:
///   kStarting   no try yet;
///   kWaiting    a watch is in the broker, or its wake is on the way; the
///               alarm is set;
///   kOverdue    the alarm rang when the wake had already taken the watch:
///               that wake's try ends the call, one way or the other;
///   kDone       the call has ended; every later event is ignored.
/// A try that grants or fails ends the call from any state.
///
/// Owns its Opener; shared by the broker's wake (which keeps it alive while
/// it waits), the alarm and the call (which hold it weakly). Borrows the
/// Call until it ends it, exactly once. Thread-safe.
/// Ends the call with the try's status, the delivery's, DEADLINE_EXCEEDED or
/// CANCELLED.
class WaitingOpen : public std::enable_shared_from_this<WaitingOpen> {
 public:
  /// The call a waiting open answers: gRPC's in the daemon (MemdService), a
  /// fake in tests. Called with the wait's mutex held: must not call back.
  /// Its alarms: kDeadline, and kMemory only for a wait made with a memory
  /// wait.
  class Call : public AlarmedCall {
   public:
    // Hands the grant to the client; the status ends the call.
    virtual absl::Status Deliver(broker::Grant grant) = 0;
    // Ends the call (and its alarm); called once, last.
    virtual void End(const absl::Status& status) = 0;
  };

  enum class State { kStarting, kWaiting, kOverdue, kDone };
  enum class Event { kWake, kAlarm, kMemoryAlarm, kCancelled };

  // `name`: the buffer's, for the deadline's message. `wait`: the whole
  // call's; `memory_wait`: how long of it may go to waiting for memory,
  // from the start (none: as long as the call). Make it with
  // std::make_shared, then Start.
  WaitingOpen(std::unique_ptr<Opener> opener, std::string name, absl::Duration wait,
              Call& call, std::optional<absl::Duration> memory_wait = std::nullopt);

  // The first try; the call may have ended when it returns.
  void Start() { On(Event::kWake); }
  // Every transition, in one place.
  void On(Event event) ABSL_LOCKS_EXCLUDED(mu_);
  State state() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void TryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeadlineExceeded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const absl::Duration wait_;
  const std::optional<absl::Duration> memory_wait_;

  mutable absl::Mutex mu_;
  const std::unique_ptr<Opener> opener_ ABSL_PT_GUARDED_BY(mu_);
  Call& call_ ABSL_GUARDED_BY(mu_);  // Not touched once kDone.
  State state_ ABSL_GUARDED_BY(mu_) = State::kStarting;
};

}  // namespace memd::service
