#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace memd {

// Raises this process's soft RLIMIT_NOFILE to its hard limit and returns
// the soft limit now in force.
std::uint64_t RaiseDescriptorLimit();

// The limits that decide how many descriptors clients can make memd hold:
// each session's socket, each control connection, and the descriptors on
// their way to a session's client (which the kernel counts against memd's
// user and refuses beyond RLIMIT_NOFILE: "Too many references", for every
// user's sends at once).
struct DescriptorCaps {
  std::uint64_t max_sessions = 0;
  std::uint64_t max_sessions_per_uid = 0;
  std::uint64_t max_connections = 0;
  std::uint64_t max_connections_per_uid = 0;
  std::uint64_t max_fds_in_flight_per_session = 0;
};

// At least this many uids are served however small RLIMIT_NOFILE is: where
// the budget lowers a cap, the per-uid cap becomes at most 1/kMinUidsServed
// of it, so that no fewer than kMinUidsServed other uids, each holding all
// it may, can leave a uid without a session or a connection.
inline constexpr std::uint64_t kMinUidsServed = 4;
// What the budget keeps for each of those uids at the least: sessions (a
// program and memctl, say), each with this many descriptors in flight.
inline constexpr std::uint64_t kMinSessionsPerUid = 2;
inline constexpr std::uint64_t kMinFdsInFlightPerSession = 4;
// Below this memd refuses to start: half of it is memd's own, and the other
// half just carries kMinUidsServed x kMinSessionsPerUid sessions with
// kMinFdsInFlightPerSession descriptors in flight each.
inline constexpr std::uint64_t kMinDescriptorLimit =
    2 * kMinUidsServed * kMinSessionsPerUid * kMinFdsInFlightPerSession;

// The caps memd runs with, and why each one lowered was lowered.
struct DescriptorBudget {
  DescriptorCaps caps;
  std::vector<std::string> lowered;  // One line per cap lowered; empty if none.
};

// Sizes `configured` to `descriptor_limit` (RLIMIT_NOFILE). Half of the
// limit is kept for memd itself (segments, listeners, gRPC, logs); the other
// half bounds both what clients hold in memd's descriptor table (sessions'
// sockets plus control connections) and what may be in flight to them
// (sessions x descriptors in flight each). Where the configuration does not
// fit, the sessions and connections share the table, sessions are lowered
// to what the in-flight half carries, and the in-flight bound is lowered
// (not below kMinFdsInFlightPerSession) only where that would leave fewer
// than kMinUidsServed x kMinSessionsPerUid sessions. A per-uid cap is lowered
// to 1/kMinUidsServed of its lowered total. Caps are never raised.
// Errors: FAILED_PRECONDITION below kMinDescriptorLimit, with the numbers.
absl::StatusOr<DescriptorBudget> BudgetDescriptors(const DescriptorCaps& configured,
                                                   std::uint64_t descriptor_limit);

// Whether the budget (`caps`) lowered a cap the operator chose: one
// `configured` to a value other than memd's `defaults`. Only then is a lowered
// cap news worth a warning; memd's own defaults need RLIMIT_NOFILE 262144,
// so a shell's limit lowers them on every start, and a node whose clients
// need more sessions than it got says so by setting them.
bool LoweredAChosenCap(const DescriptorCaps& configured, const DescriptorCaps& defaults,
                       const DescriptorCaps& caps);

}  // namespace memd
