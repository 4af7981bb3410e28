#include "daemon/session/rate_limited_log.h"

#include "spdlog/spdlog.h"

namespace memd::session {

void RateLimitedLog::Warn(absl::Time now, const std::string& message) {
  if (now - last_ < interval_) {
    ++suppressed_;
    return;
  }
  if (suppressed_ > 0) {
    spdlog::warn("{} ({} more like it in the last {})", message, suppressed_,
                 absl::FormatDuration(now - last_));
  } else {
    spdlog::warn("{}", message);
  }
  last_ = now;
  suppressed_ = 0;
}

}  // namespace memd::session
