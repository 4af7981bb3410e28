#include "daemon/backend/level_zero/ze_events.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/backend/level_zero/ze_copy_device.h"

namespace memd::backend {

ZeEvents::~ZeEvents() {
  absl::MutexLock lock(&mu_);
  if (abandoned_) return;
  const ze::LoaderApi& api = device_.loader().api();
  for (ze_event_handle_t event : events_) api.EventDestroy(event);
  for (ze_event_pool_handle_t pool : pools_) api.EventPoolDestroy(pool);
}

void ZeEvents::Abandon() {
  absl::MutexLock lock(&mu_);
  abandoned_ = true;
}

ze_event_handle_t ZeEvents::handle(std::uint32_t event) const {
  absl::MutexLock lock(&mu_);
  return events_[event];
}

void ZeEvents::Give(std::uint32_t event, bool signalled) {
  absl::MutexLock lock(&mu_);
  if (signalled) {
    free_.push_back(event);
  } else {
    unsettled_.push_back(event);
  }
}

absl::StatusOr<std::uint32_t> ZeEvents::Take() {
  absl::MutexLock lock(&mu_);
  const ze::LoaderApi& api = device_.loader().api();
  // The oldest given back first: a stream runs in order, so when one of
  // them has not signalled yet, none given back after it has either.
  while (free_.empty() && !unsettled_.empty() &&
         api.EventQueryStatus(events_[unsettled_.front()]) == ZE_RESULT_SUCCESS) {
    free_.push_back(unsettled_.front());
    unsettled_.pop_front();
  }
  std::uint32_t event = 0;
  if (free_.empty()) {
    MEMD_ASSIGN_OR_RETURN(event, Make());
  } else {
    event = free_.back();
    free_.pop_back();
  }
  absl::Status reset =
      device_.Status(api.EventHostReset(events_[event]), "zeEventHostReset", CopyCall::kEnqueue);
  if (!reset.ok()) {
    free_.push_back(event);
    return reset;
  }
  return event;
}

absl::StatusOr<std::uint32_t> ZeEvents::Make() {
  const ze::LoaderApi& api = device_.loader().api();
  const ze::Gpu& gpu = device_.gpu();
  if (in_last_pool_ == kEventsPerPool) {
    ze_event_pool_desc_t desc{};
    desc.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC;
    // Host-visible: the host queries and waits on them.
    desc.flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE;
    desc.count = kEventsPerPool;
    ze_device_handle_t device = gpu.device;
    ze_event_pool_handle_t pool = nullptr;
    MEMD_RETURN_IF_ERROR(device_.Status(api.EventPoolCreate(gpu.context, &desc, 1, &device, &pool),
                                        absl::StrCat("zeEventPoolCreate(", kEventsPerPool,
                                                     " events, pool ", pools_.size() + 1, ")"),
                                        CopyCall::kEnqueue));
    pools_.push_back(pool);
    in_last_pool_ = 0;
  }
  ze_event_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_EVENT_DESC;
  desc.index = in_last_pool_;
  // Host scope on signal: the bytes a copy wrote are visible to the host
  // once it sees the event (a drain reads the staging slot then).
  desc.signal = ZE_EVENT_SCOPE_FLAG_HOST;
  desc.wait = ZE_EVENT_SCOPE_FLAG_HOST;
  ze_event_handle_t event = nullptr;
  MEMD_RETURN_IF_ERROR(device_.Status(api.EventCreate(pools_.back(), &desc, &event),
                                      "zeEventCreate", CopyCall::kEnqueue));
  events_.push_back(event);
  ++in_last_pool_;
  return static_cast<std::uint32_t>(events_.size() - 1);
}

}  // namespace memd::backend
