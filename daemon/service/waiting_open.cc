#include "daemon/service/waiting_open.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "daemon/service/convert.h"

namespace memd::service {

// The call's reactor: forwards cancellation to the wait and frees itself
// when gRPC is done with the call.
class WaitingOpen::Reactor : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override {
    if (auto wait = wait_.lock()) wait->Cancel();
  }
  void OnDone() override { delete this; }

  std::weak_ptr<WaitingOpen> wait_;
};

grpc::ServerUnaryReactor* WaitingOpen::Start(broker::Broker& broker,
                                             std::string name,
                                             absl::Duration wait,
                                             Finished finished, Attempt attempt,
                                             Deliver deliver) {
  auto* reactor = new Reactor;
  std::shared_ptr<WaitingOpen> waiting(
      new WaitingOpen(broker, std::move(name), wait, std::move(finished),
                      std::move(attempt), std::move(deliver), reactor));
  reactor->wait_ = waiting;
  waiting->Try();
  return reactor;
}

WaitingOpen::WaitingOpen(broker::Broker& broker, std::string name,
                         absl::Duration wait, Finished finished, Attempt attempt,
                         Deliver deliver, Reactor* reactor)
    : broker_(broker),
      name_(std::move(name)),
      wait_(wait),
      finished_(std::move(finished)),
      attempt_(std::move(attempt)),
      deliver_(std::move(deliver)),
      watch_(broker.NewWatchId()),
      reactor_(reactor) {}

void WaitingOpen::Try() {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  std::shared_ptr<WaitingOpen> self = shared_from_this();
  auto result = attempt_(watch_, [self] { self->Try(); });
  if (!result.ok()) return FinishLocked(result.status());
  if (result->has_value()) return FinishLocked(deliver_(std::move(**result)));
  if (expired_) {
    // The alarm fired while a wake was on its way, and the wake found
    // reason to wait again: nothing else would end this wait. (Should that
    // wake's watch have fired too, its own try comes next and ends here.)
    if (broker_.CancelWatch(watch_)) FinishLocked(DeadlineExceeded());
    return;
  }
  if (!alarm_set_) {
    alarm_set_ = true;
    // Weak: the alarm keeps its callback as long as it lives, and it lives
    // in this object. The broker's watch is what keeps a wait alive.
    std::weak_ptr<WaitingOpen> weak = self;
    alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(wait_),
               [weak](bool fired) {
                 if (auto waiting = weak.lock(); waiting && fired) waiting->Expire();
               });
  }
}

void WaitingOpen::Expire() {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  // When the wake won the race it is about to try again: it finishes the
  // call, or ends the wait if it would wait again.
  if (!broker_.CancelWatch(watch_)) {
    expired_ = true;
    return;
  }
  FinishLocked(DeadlineExceeded());
}

absl::Status WaitingOpen::DeadlineExceeded() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "buffer '", name_, "' was not sealed within ", absl::FormatDuration(wait_)));
}

void WaitingOpen::Cancel() {
  absl::MutexLock lock(&mu_);
  if (done_) return;
  broker_.CancelWatch(watch_);
  FinishLocked(absl::CancelledError("the call was cancelled"));
}

void WaitingOpen::FinishLocked(const absl::Status& status) {
  done_ = true;
  if (alarm_set_) alarm_.Cancel();
  finished_(status);
  reactor_->Finish(ToGrpcStatus(status));
}

}  // namespace memd::service
