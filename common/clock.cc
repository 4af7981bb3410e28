#include "common/clock.h"

namespace memd {

const RealClock& RealClock::Default() {
  static const RealClock clock;
  return clock;
}

absl::Time RealClock::Now() const { return absl::Now(); }

bool RealClock::WaitWithDeadline(absl::Mutex* mu, absl::CondVar* cv,
                                 absl::Time deadline) const {
  return cv->WaitWithDeadline(mu, deadline);
}

}  // namespace memd
