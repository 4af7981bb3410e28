#include "daemon/service/transfer_wait.h"

#include <utility>

namespace memd::service {

TransferWait::TransferWait(std::unique_ptr<TransferWatcher> watcher, absl::Duration wait,
                           Call& call)
    : watcher_(std::move(watcher)), wait_(wait), call_(call) {}

void TransferWait::Start() {
  // The watch keeps this wait alive for as long as the engine holds it; it
  // may run at once, on this thread, if the transfer has ended.
  absl::StatusOr<std::uint64_t> token = watcher_->Watch(
      [self = shared_from_this()](const transfer::TransferProgress& progress) {
        self->Ended(progress);
      });
  bool cancel_now = false;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kDone) return;  // Ended inside Watch.
    if (!token.ok()) return EndLocked(token.status(), nullptr);
    token_ = *token;
    state_ = State::kWatching;
    cancel_now = cancel_pending_;
    if (!cancel_now) {
      // Weak: the alarm lives as long as the call and must not keep the
      // wait alive; the engine's watch does that.
      call_.SetAlarm(Call::Alarm::kDeadline, wait_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->On(Event::kAlarm);
      });
    }
  }
  if (cancel_now) On(Event::kCancelled);
}

void TransferWait::On(Event event) {
  std::uint64_t token = 0;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kDone) return;  // Late: the call has ended.
    if (state_ == State::kStarting) {
      // Only a cancel can come before the alarm is set; Start sees it.
      cancel_pending_ = true;
      return;
    }
    token = token_;
  }
  // A watch that cannot be taken back has run or is running: its Ended
  // answers the call.
  if (!watcher_->CancelWatch(token)) return;
  if (event == Event::kCancelled) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kDone) EndLocked(absl::CancelledError("the call was cancelled"), nullptr);
    return;
  }
  absl::StatusOr<transfer::TransferProgress> progress = watcher_->Progress();
  absl::MutexLock lock(&mu_);
  if (state_ == State::kDone) return;
  if (!progress.ok()) return EndLocked(progress.status(), nullptr);
  EndLocked(absl::OkStatus(), &*progress);
}

void TransferWait::Ended(const transfer::TransferProgress& progress) {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kDone) return;
  EndLocked(absl::OkStatus(), &progress);
}

void TransferWait::EndLocked(const absl::Status& status,
                             const transfer::TransferProgress* progress) {
  state_ = State::kDone;
  call_.End(status, progress);
}

TransferWait::State TransferWait::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

}  // namespace memd::service
