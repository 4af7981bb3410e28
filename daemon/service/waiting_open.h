#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/broker/broker.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/server_callback.h"

namespace memd::service {

/// One Open or OpenOrCreate call that waits for a buffer to be sealed,
/// without holding a thread: each attempt either finishes the call or leaves
/// a watch in the broker, whose wake (a seal, the session's end) tries again.
/// A gRPC alarm ends the wait at its deadline; a cancelled call stops it.
///
/// Owns itself (shared by the wake, the alarm and the reactor) and finishes
/// the call exactly once. Thread-safe. Finishes with the attempt's status,
/// DEADLINE_EXCEEDED or CANCELLED.
class WaitingOpen : public std::enable_shared_from_this<WaitingOpen> {
 public:
  // One try: a grant, an error, or std::nullopt after registering `wake`
  // under `watch`.
  using Attempt = std::function<absl::StatusOr<std::optional<broker::Grant>>(
      broker::WatchId watch, std::function<void()> wake)>;
  // Hands the grant to the client; its status finishes the call.
  using Deliver = std::function<absl::Status(broker::Grant grant)>;

  // Told how the call ended, once.
  using Finished = std::function<void(const absl::Status& status)>;

  // Starts the wait and returns the call's reactor.
  static grpc::ServerUnaryReactor* Start(broker::Broker& broker,
                                         std::string name, absl::Duration wait,
                                         Finished finished, Attempt attempt,
                                         Deliver deliver);

 private:
  class Reactor;

  WaitingOpen(broker::Broker& broker, std::string name, absl::Duration wait,
              Finished finished, Attempt attempt, Deliver deliver, Reactor* reactor);

  void Try();
  void Expire();
  void Cancel();
  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeadlineExceeded() const;

  broker::Broker& broker_;
  const std::string name_;
  const absl::Duration wait_;
  const Finished finished_;
  const Attempt attempt_;
  const Deliver deliver_;
  const broker::WatchId watch_;

  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);  // Not touched once done_.
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_set_ ABSL_GUARDED_BY(mu_) = false;
  // The alarm fired but a wake was already on its way (it owns the end).
  bool expired_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Alarm alarm_;
};

}  // namespace memd::service
