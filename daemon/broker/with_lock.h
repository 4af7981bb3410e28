#pragma once

// Broker::WithLock, for the broker's own .cc files (broker.cc,
// broker_adopt.cc): runs a body under the registry mutex, then what it
// collected for after the unlock.

#include <type_traits>
#include <utility>

#include "daemon/broker/broker.h"

namespace memd::broker {

template <typename Body>
auto Broker::WithLock(Body body) {
  AfterUnlock after;
  after.broker = this;
  if constexpr (std::is_void_v<std::invoke_result_t<Body&, AfterUnlock&>>) {
    {
      absl::MutexLock lock(&mu_);
      body(after);
    }
    std::move(after).Run();
  } else {
    auto result = [&] {
      absl::MutexLock lock(&mu_);
      return body(after);
    }();
    std::move(after).Run();
    return result;
  }
}

}  // namespace memd::broker
