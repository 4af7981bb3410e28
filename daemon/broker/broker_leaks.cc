// Broker: the leak report (leaks.h) over the registry. The facts are read
// under the mutex; FindLeaks judges and formats them after it, so that the
// lock is held for copies only.

#include <algorithm>
#include <optional>

#include "common/status_macros.h"
#include "daemon/broker/broker.h"

namespace memd::broker {

absl::StatusOr<LeakReport> Broker::Leaks(SessionId session, const LeakRules& rules) {
  MEMD_RETURN_IF_ERROR(ValidateLeakRules(rules));
  LeakFacts facts;
  absl::Time now;
  {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    // What a uid holds tells what it does: others' stay theirs (as Sessions
    // and Usage), root sees every uid's.
    const uid_t uid = caller->peer.uid;
    facts = LeakFactsLocked(uid == 0 ? std::nullopt : std::optional<uid_t>(uid));
    now = clock_.Now();
  }
  return CapLeaks(FindLeaks(facts.buffers, facts.leases, facts.sessions, now, rules));
}

LeakFacts Broker::LeakFactsLocked(std::optional<uid_t> only) const {
  auto shown = [&](uid_t uid) { return !only.has_value() || *only == uid; };
  LeakFacts facts;
  for (const auto& [name, id] : names_) {
    const Buffer& home = *buffers_.at(id);
    const BufferInfo& info = home.info;
    if (!shown(info.owner_uid)) continue;
    // The pools' count: the home's allocation and every copy's (as Stat's
    // replicas list them).
    std::uint64_t bytes = home.allocation.bytes;
    for (const auto& [at, copy] : home.copies) bytes += buffers_.at(copy)->allocation.bytes;
    const bool sealed = info.state == BufferState::kSealed;
    // Opens count from memd's start (UsageTracker): a buffer adopted after
    // a restart is unopened only since then.
    const absl::Time since = sealed ? std::max(info.created, started_) : info.created;
    facts.buffers.push_back({name, info.owner_uid, bytes,
                             info.persistence == Persistence::kPersistent, sealed, since,
                             tracker_.LastUsed(id), info.creator_pid});
  }
  for (const auto& [id, lease] : leases_) {
    if (!shown(lease.uid)) continue;
    const Buffer& record = *buffers_.at(lease.buffer);
    auto holder = sessions_.find(lease.session);
    facts.leases.push_back({id, record.info.name, lease.uid,
                            holder == sessions_.end() ? 0 : holder->second.peer.pid,
                            lease.granted, record.allocation.bytes});
  }
  for (const auto& [id, session] : sessions_) {
    if (!shown(session.peer.uid)) continue;
    facts.sessions.push_back(
        {id, session.peer.uid, session.peer.pid, session.command, session.leases.size()});
  }
  return facts;
}

}  // namespace memd::broker
