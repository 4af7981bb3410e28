#include "daemon/backend/level_zero/ze_waiter.h"

#include <utility>

#include "daemon/backend/level_zero/ze_copy_device.h"
#include "daemon/backend/level_zero/ze_events.h"

namespace memd::backend {

ZeWaiter::~ZeWaiter() { Stop(); }

void ZeWaiter::Add(std::uint32_t event, std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  pending_.push_back(Pending{event, std::move(wake)});
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { Run(); });
}

void ZeWaiter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // The thread waits for the oldest with no timeout; the driver may
    // still signal it later, which is harmless.
    if (!pending_.empty()) {
      device_.loader().api().EventHostSignal(events_.handle(pending_.front().event));
    }
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  for (const Pending& pending : pending_) events_.Give(pending.event, /*signalled=*/false);
  pending_.clear();
}

void ZeWaiter::Run() {
  const ze::LoaderApi& api = device_.loader().api();
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !pending_.empty();
  };
  for (;;) {
    std::uint32_t event = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      event = pending_.front().event;
    }
    // No timeout: Stop signals the event to end the wait.
    const ze_result_t result = api.EventHostSynchronize(events_.handle(event), UINT64_MAX);
    std::function<void()> wake;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;  // Stop's signal, or a late one: nothing runs.
      wake = std::move(pending_.front().wake);
      pending_.pop_front();
    }
    // A sticky result becomes the device's health before the wake runs.
    (void)device_.Status(result, "zeEventHostSynchronize (a wake's event)", CopyCall::kSurface);
    events_.Give(event, result == ZE_RESULT_SUCCESS);
    wake();
  }
}

}  // namespace memd::backend
