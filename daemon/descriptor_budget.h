#pragma once

#include <cstdint>
#include <string>

namespace memd {

// Raises this process's soft RLIMIT_NOFILE to its hard limit and returns
// the soft limit now in force.
std::uint64_t RaiseDescriptorLimit();

// How many sessions fit the descriptor limit. Each session takes a socket
// in memd's descriptor table and may have `fds_in_flight` descriptors on
// their way to its client, which the kernel counts against memd's user and
// refuses beyond RLIMIT_NOFILE ("Too many references": every user's sends
// would then fail). Half the limit is kept for everything else (segments,
// control connections, gRPC, logs). The daemon then lowers
// max_sessions_per_uid to at most half of the sessions left.
struct SessionBudget {
  std::uint64_t max_sessions = 0;
  std::string note;  // Why max_sessions was lowered; empty when it was not.
};
SessionBudget BudgetSessions(std::uint64_t max_sessions,
                             std::uint64_t fds_in_flight,
                             std::uint64_t max_connections,
                             std::uint64_t descriptor_limit);

}  // namespace memd
