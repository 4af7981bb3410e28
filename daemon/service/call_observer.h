#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace memd::service {

/// Told about every call the service finishes: which method, how it ended
/// and how long it took (waiting opens included). The service does not know
/// what watches it (metrics, in the daemon). Implementations must be
/// thread-safe and cheap: they run on the call's thread.
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual void Observe(std::string_view method, absl::StatusCode code,
                       absl::Duration elapsed) = 0;
};

}  // namespace memd::service
