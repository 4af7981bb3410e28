#include "daemon/descriptor_budget.h"

#include <sys/resource.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace memd {

std::uint64_t RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? ~std::uint64_t{0} : limit.rlim_cur;
}

SessionBudget BudgetSessions(std::uint64_t max_sessions,
                             std::uint64_t fds_in_flight,
                             std::uint64_t max_connections,
                             std::uint64_t descriptor_limit) {
  const std::uint64_t half = descriptor_limit / 2;
  const std::uint64_t room = half > max_connections ? half - max_connections : 0;
  const std::uint64_t fit = std::max<std::uint64_t>(1, room / (1 + fds_in_flight));
  if (max_sessions <= fit) return {max_sessions, ""};
  return {fit, absl::StrCat(
                   "max_sessions lowered from ", max_sessions, " to ", fit,
                   ": each session takes a socket and up to ", fds_in_flight,
                   " descriptors in flight (max_fds_in_flight_per_session), "
                   "and with ", max_connections,
                   " control connections (max_connections) they must fit half "
                   "of RLIMIT_NOFILE ",
                   descriptor_limit, "; raise LimitNOFILE= to serve more")};
}

}  // namespace memd
