#include "daemon/service/waiting_open.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::service {

absl::StatusOr<std::optional<broker::Grant>> AskBroker(
    broker::Broker& broker, broker::SessionId session, const OpenRequest& request,
    broker::WatchId watch, std::function<void()> wake) {
  if (const auto* open = std::get_if<broker::OpenParams>(&request)) {
    return broker.OpenOrWatch(session, *open, watch, std::move(wake));
  }
  if (const auto* create = std::get_if<WaitForMemory>(&request)) {
    if (!wake) {
      MEMD_ASSIGN_OR_RETURN(broker::Grant grant, broker.Create(session, *create));
      return std::optional<broker::Grant>(std::move(grant));
    }
    return broker.CreateOrWait(session, *create, watch, std::move(wake));
  }
  if (const auto* either = std::get_if<OpenOrCreateWaitingForMemory>(&request)) {
    if (!wake) return broker.OpenOrCreate(session, *either, watch, nullptr);
    return broker.OpenOrCreateOrWait(session, *either, watch, std::move(wake));
  }
  return broker.OpenOrCreate(session, std::get<broker::CreateParams>(request), watch,
                             std::move(wake));
}

BrokerOpener::BrokerOpener(broker::Broker& broker, broker::SessionId session,
                           OpenRequest request)
    : broker_(broker),
      session_(session),
      request_(std::move(request)),
      watch_(broker.NewWatchId()) {}

absl::StatusOr<std::optional<broker::Grant>> BrokerOpener::Try(
    std::function<void()> woken) {
  absl::StatusOr<std::optional<broker::Grant>> tried =
      AskBroker(broker_, session_, request_, watch_, std::move(woken));
  waited_for_memory_ = std::holds_alternative<WaitForMemory>(request_) ||
                       (tried.ok() && !tried->has_value() &&
                        std::holds_alternative<OpenOrCreateWaitingForMemory>(request_) &&
                        broker_.WaitsForMemory(watch_));
  return tried;
}

bool BrokerOpener::CancelWatch() { return broker_.CancelWatch(watch_); }

std::optional<absl::Status> BrokerOpener::Overdue(absl::Duration wait) const {
  if (!waited_for_memory_) return std::nullopt;
  if (const auto* create = std::get_if<WaitForMemory>(&request_)) {
    return broker_.NoRoomWithin(session_, *create, wait);
  }
  return broker_.NoRoomWithin(session_, std::get<OpenOrCreateWaitingForMemory>(request_), wait);
}

WaitingOpen::WaitingOpen(std::unique_ptr<Opener> opener, std::string name,
                         absl::Duration wait, Call& call)
    : name_(std::move(name)), wait_(wait), opener_(std::move(opener)), call_(call) {}

void WaitingOpen::On(Event event) {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kDone) return;  // Late: the call has ended.
  switch (event) {
    case Event::kWake:
      return TryLocked();
    case Event::kAlarm:
      // Only a watch taken back proves no wake is on its way; else the wake
      // owns the end (kOverdue).
      if (!opener_->CancelWatch()) {
        state_ = State::kOverdue;
        return;
      }
      return EndLocked(DeadlineExceeded());
    case Event::kCancelled:
      opener_->CancelWatch();
      return EndLocked(absl::CancelledError("the call was cancelled"));
  }
}

void WaitingOpen::TryLocked() {
  // The wake keeps this wait alive for as long as the broker holds it.
  auto tried = opener_->Try([self = shared_from_this()] { self->On(Event::kWake); });
  if (!tried.ok()) return EndLocked(tried.status());
  if (tried->has_value()) return EndLocked(call_.Deliver(std::move(**tried)));
  // The try left a watch.
  switch (state_) {
    case State::kStarting:
      state_ = State::kWaiting;
      // Weak: the alarm lives as long as the call, and must not keep the
      // wait alive; the broker's watch does that.
      call_.SetAlarm(wait_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->On(Event::kAlarm);
      });
      return;
    case State::kWaiting:
      return;
    case State::kOverdue:
      // The alarm rang while this wake was on its way, and the wake found
      // reason to wait again: nothing else would end this wait. (Should the
      // new watch have been taken meanwhile, its wake comes next and ends
      // here.)
      if (opener_->CancelWatch()) EndLocked(DeadlineExceeded());
      return;
    case State::kDone:
      return;  // Not reached: On() returns first.
  }
}

void WaitingOpen::EndLocked(const absl::Status& status) {
  state_ = State::kDone;
  call_.End(status);
}

WaitingOpen::State WaitingOpen::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status WaitingOpen::DeadlineExceeded() const {
  if (std::optional<absl::Status> overdue = opener_->Overdue(wait_)) return *overdue;
  return absl::DeadlineExceededError(absl::StrCat(
      "buffer '", name_, "' was not sealed within ", absl::FormatDuration(wait_)));
}

}  // namespace memd::service
