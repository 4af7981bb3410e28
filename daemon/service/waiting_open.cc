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
  if (const auto* copy = std::get_if<CopyWaitingForMemory>(&request)) {
    if (!wake) return broker.OpenOrWatch(session, *copy, watch, nullptr);
    return broker.OpenOrWaitForMemory(session, *copy, watch, std::move(wake));
  }
  return broker.OpenOrCreate(session, std::get<broker::CreateParams>(request), watch,
                             std::move(wake));
}

namespace {

// The open a request makes, when it is one (an Open, with or without a
// wait for memory for its copy).
const broker::OpenParams* OpenOf(const OpenRequest& request) {
  if (const auto* open = std::get_if<broker::OpenParams>(&request)) return open;
  return std::get_if<CopyWaitingForMemory>(&request);
}

}  // namespace

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
  // A Create waits for nothing else; the opens may wait for a seal or a
  // copy instead.
  const bool may_wait_for_memory =
      std::holds_alternative<OpenOrCreateWaitingForMemory>(request_) ||
      std::holds_alternative<CopyWaitingForMemory>(request_);
  waited_for_memory_ = std::holds_alternative<WaitForMemory>(request_) ||
                       (tried.ok() && !tried->has_value() && may_wait_for_memory &&
                        broker_.WaitsForMemory(watch_));
  const broker::OpenParams* open = OpenOf(request_);
  if (open != nullptr && tried.ok() && !tried->has_value() && !found_name_) {
    found_name_ = !absl::IsNotFound(broker_.Stat(session_, open->name).status());
  }
  return tried;
}

bool BrokerOpener::CancelWatch() { return broker_.CancelWatch(watch_); }

std::optional<absl::Status> BrokerOpener::Overdue(absl::Duration wait) const {
  if (!waited_for_memory_) {
    // "Not sealed" misleads where there was nothing to seal (a misspelt
    // name): said only when no try found the name, nor does a look now.
    const broker::OpenParams* open = OpenOf(request_);
    if (open == nullptr || found_name_ ||
        !absl::IsNotFound(broker_.Stat(session_, open->name).status())) {
      return std::nullopt;
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "buffer '", open->name, "' does not exist: there was none when the wait began, nor ",
        absl::FormatDuration(wait),
        " later (an open that waits takes a buffer once it is created and sealed); "
        "check the name, and that its producer runs"));
  }
  if (const auto* create = std::get_if<WaitForMemory>(&request_)) {
    return broker_.NoRoomWithin(session_, *create, wait);
  }
  if (const auto* copy = std::get_if<CopyWaitingForMemory>(&request_)) {
    return broker_.NoRoomForCopyWithin(session_, *copy, wait);
  }
  return broker_.NoRoomWithin(session_, std::get<OpenOrCreateWaitingForMemory>(request_), wait);
}

WaitingOpen::WaitingOpen(std::unique_ptr<Opener> opener, std::string name,
                         absl::Duration wait, Call& call,
                         std::optional<absl::Duration> memory_wait)
    : name_(std::move(name)),
      wait_(wait),
      memory_wait_(memory_wait),
      opener_(std::move(opener)),
      call_(call) {}

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
    case Event::kMemoryAlarm:
      // Only a call still waiting for memory ends; one that got its memory
      // waits for its seal or copy until kAlarm. A wake on its way means
      // memory came just now: it goes on.
      if (state_ != State::kWaiting || !opener_->WaitsForMemory() || !opener_->CancelWatch()) {
        return;
      }
      return EndLocked(opener_->Overdue(*memory_wait_).value_or(DeadlineExceeded()));
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
      call_.SetAlarm(Call::Alarm::kDeadline, wait_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->On(Event::kAlarm);
      });
      if (memory_wait_.has_value() && *memory_wait_ < wait_) {
        call_.SetAlarm(Call::Alarm::kMemory, *memory_wait_, [weak = weak_from_this()] {
          if (auto self = weak.lock()) self->On(Event::kMemoryAlarm);
        });
      }
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
