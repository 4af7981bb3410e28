#include "daemon/descriptor_budget.h"

#include <sys/resource.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace memd {
namespace {

// The sessions' sockets that fit beside the control connections in `half`
// of the descriptor table: all configured when both fit, else the sessions
// keep at least half of it (the connections get the rest).
std::uint64_t SessionsTheTableHolds(const DescriptorCaps& configured, std::uint64_t half) {
  const std::uint64_t connections = std::min(configured.max_connections, half);
  if (configured.max_sessions <= half - connections) return configured.max_sessions;
  return std::min(configured.max_sessions, std::max(half - connections, half / 2));
}

// a + b and a * b, or the largest value where they overflow (config values
// are anything up to 2^64 - 1).
std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > ~std::uint64_t{0} - b ? ~std::uint64_t{0} : a + b;
}
std::uint64_t SaturatingMultiply(std::uint64_t a, std::uint64_t b) {
  return b != 0 && a > ~std::uint64_t{0} / b ? ~std::uint64_t{0} : a * b;
}

// The RLIMIT_NOFILE at which BudgetDescriptors lowers nothing.
std::uint64_t DescriptorsNeeded(const DescriptorCaps& configured) {
  const std::uint64_t table = SaturatingAdd(configured.max_sessions, configured.max_connections);
  const std::uint64_t in_flight =
      SaturatingMultiply(configured.max_sessions, configured.max_fds_in_flight_per_session);
  return SaturatingMultiply(2, std::max(table, in_flight));
}

}  // namespace

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

absl::StatusOr<DescriptorBudget> BudgetDescriptors(const DescriptorCaps& configured,
                                                   std::uint64_t descriptor_limit) {
  if (descriptor_limit < kMinDescriptorLimit) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RLIMIT_NOFILE is ", descriptor_limit, " (its hard limit, or memd could not "
        "raise it); memd needs at least ", kMinDescriptorLimit, ": half for its own "
        "descriptors, and half to give ", kMinUidsServed, " uids ", kMinSessionsPerUid,
        " sessions each, with ", kMinFdsInFlightPerSession,
        " descriptors in flight per session; raise LimitNOFILE= (ulimit -Hn)"));
  }
  const std::uint64_t half = descriptor_limit / 2;
  DescriptorBudget budget{configured, {}};
  DescriptorCaps& caps = budget.caps;
  const std::uint64_t configured_in_flight =
      std::max<std::uint64_t>(1, configured.max_fds_in_flight_per_session);

  // Descriptors in flight: sessions x the bound of each fit the other half.
  // Where the configured bound would leave too few sessions for the uids
  // memd must serve, the bound goes down first.
  const std::uint64_t table_sessions = SessionsTheTableHolds(configured, half);
  const std::uint64_t wanted_sessions =
      std::min(table_sessions, kMinUidsServed * kMinSessionsPerUid);
  std::uint64_t in_flight = configured_in_flight;
  if (half / in_flight < wanted_sessions) {
    in_flight = std::min(configured_in_flight,
                         std::max(kMinFdsInFlightPerSession, half / wanted_sessions));
  }
  caps.max_fds_in_flight_per_session = std::min(configured.max_fds_in_flight_per_session,
                                                 in_flight);
  caps.max_sessions = std::min(table_sessions, half / in_flight);
  caps.max_connections = std::min(configured.max_connections, half - caps.max_sessions);

  const std::string why = absl::StrCat("RLIMIT_NOFILE ", descriptor_limit);
  if (caps.max_fds_in_flight_per_session < configured.max_fds_in_flight_per_session) {
    budget.lowered.push_back(absl::StrCat(
        "max_fds_in_flight_per_session lowered from ",
        configured.max_fds_in_flight_per_session, " to ", caps.max_fds_in_flight_per_session,
        ": ", wanted_sessions, " sessions (", kMinUidsServed, " uids x ",
        kMinSessionsPerUid, ") must fit the ", half, " descriptors in flight that ", why,
        " leaves them (half of it)"));
  }
  if (caps.max_sessions < configured.max_sessions) {
    budget.lowered.push_back(absl::StrCat(
        "max_sessions lowered from ", configured.max_sessions, " to ", caps.max_sessions,
        ": each session takes a socket and may have ", caps.max_fds_in_flight_per_session,
        " descriptors in flight (max_fds_in_flight_per_session); with ", why,
        " the sockets share ", half, " descriptors with the control connections, and "
        "the descriptors in flight may be ", half));
  }
  if (caps.max_connections < configured.max_connections) {
    budget.lowered.push_back(absl::StrCat(
        "max_connections lowered from ", configured.max_connections, " to ",
        caps.max_connections, ": with ", why, " control connections share ", half,
        " descriptors with the ", caps.max_sessions, " sessions' sockets"));
  }
  // One uid may take at most its share of what was lowered, so that a few
  // uids cannot leave the others nothing.
  auto share = [&](const char* name, std::uint64_t& per_uid, std::uint64_t configured_total,
                   std::uint64_t total, const char* total_name) {
    if (total >= configured_total) return;
    const std::uint64_t most = std::max<std::uint64_t>(1, total / kMinUidsServed);
    if (per_uid <= most) return;
    budget.lowered.push_back(absl::StrCat(
        name, " lowered from ", per_uid, " to ", most, ": 1/", kMinUidsServed, " of ",
        total_name, " ", total, ", so that one uid cannot take what ",
        kMinUidsServed, " uids need"));
    per_uid = most;
  };
  share("max_sessions_per_uid", caps.max_sessions_per_uid, configured.max_sessions,
        caps.max_sessions, "max_sessions");
  share("max_connections_per_uid", caps.max_connections_per_uid,
        configured.max_connections, caps.max_connections, "max_connections");
  if (!budget.lowered.empty()) {
    budget.lowered.push_back(absl::StrCat(
        "the configured limits need RLIMIT_NOFILE ", DescriptorsNeeded(configured),
        " or more: raise LimitNOFILE= to serve them"));
  }
  return budget;
}

bool LoweredAChosenCap(const DescriptorCaps& configured, const DescriptorCaps& defaults,
                       const DescriptorCaps& caps) {
  auto chosen_and_lowered = [&](std::uint64_t DescriptorCaps::*cap) {
    return configured.*cap != defaults.*cap && caps.*cap < configured.*cap;
  };
  return chosen_and_lowered(&DescriptorCaps::max_sessions) ||
         chosen_and_lowered(&DescriptorCaps::max_sessions_per_uid) ||
         chosen_and_lowered(&DescriptorCaps::max_connections) ||
         chosen_and_lowered(&DescriptorCaps::max_connections_per_uid) ||
         chosen_and_lowered(&DescriptorCaps::max_fds_in_flight_per_session);
}

}  // namespace memd
