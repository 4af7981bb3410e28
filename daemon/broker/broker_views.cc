// Broker: what it shows of itself and its buffers, to whom: listings,
// sessions, usage and counts (each the caller's own unless it is root).

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/permissions.h"

namespace memd::broker {
namespace {

// A prefix is any start of a valid name, so only its length and bytes are
// checked.
absl::Status ValidatePrefix(const std::string& prefix) {
  if (prefix.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix is ", prefix.size(), " bytes long; the limit is ", kMaxNameBytes));
  }
  std::size_t bad = prefix.find_first_not_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-");
  if (bad != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prefix has byte 0x%02x at position %d; names use only [A-Za-z0-9._/-]",
        static_cast<unsigned char>(prefix[bad]), bad));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<BufferInfo>> Broker::List(SessionId session,
                                                     const std::string& prefix,
                                                     bool include_unlinked) {
  MEMD_RETURN_IF_ERROR(ValidatePrefix(prefix));
  std::vector<BufferInfo> listed;
  {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    auto show = [&](const Buffer& buffer) {
      if (buffer.info.name.compare(0, prefix.size(), prefix) == 0 &&
          MayAccess(caller->peer, buffer.info, Access::kRead)) {
        listed.push_back(ViewLocked(buffer));
      }
    };
    for (const auto& [name, id] : names_) show(*buffers_.at(id));
    // Unlinked homes and the copies an unlink orphaned: nameless, but
    // their memory is still taken. Judged by the info they had when named,
    // so that nobody sees one who could not have seen it then.
    if (include_unlinked) {
      for (const auto& [id, buffer] : buffers_) {
        if (buffer->info.unlinked) show(*buffer);
      }
    }
  }
  // By name; under one name the named buffer first, then the unlinked
  // ones, oldest first.
  std::sort(listed.begin(), listed.end(), [](const BufferInfo& a, const BufferInfo& b) {
    return std::tie(a.name, a.unlinked, a.created, a.id) <
           std::tie(b.name, b.unlinked, b.created, b.id);
  });
  return listed;
}

LeaseHolders Broker::HoldersLocked(const Session& caller, const Buffer& home) const {
  // One holder per session, location and access: a session that opened a
  // buffer a thousand times is one line with its count.
  using Key = std::tuple<SessionId, std::string, Access>;
  std::map<Key, LeaseHolder> by_key;
  LeaseHolders holders;
  auto collect = [&](const Buffer& record) {
    for (LeaseId id : record.leases) {
      const Lease& lease = leases_.at(id);
      if (caller.peer.uid != 0 && lease.uid != caller.peer.uid) {
        ++holders.other_users_leases;
        continue;
      }
      LeaseHolder& holder =
          by_key[Key{lease.session, record.info.location.ToString(), lease.access}];
      if (holder.leases == 0) {
        holder.session = lease.session;
        holder.uid = lease.uid;
        // Every lease in leases_ is a live session's (an ended one's went
        // with it); a pid of 0 would say "unknown" should that ever change.
        if (auto session = sessions_.find(lease.session); session != sessions_.end()) {
          holder.pid = session->second.peer.pid;
          holder.command = session->second.command;
        }
        holder.location = record.info.location;
        holder.access = lease.access;
        holder.since = lease.granted;
      }
      ++holder.leases;
      holder.since = std::min(holder.since, lease.granted);
    }
  };
  collect(home);
  for (const auto& [at, id] : home.copies) collect(*buffers_.at(id));
  for (auto& [key, holder] : by_key) holders.listed.push_back(std::move(holder));
  std::sort(holders.listed.begin(), holders.listed.end(),
            [](const LeaseHolder& a, const LeaseHolder& b) {
              return std::tie(a.since, a.session) < std::tie(b.since, b.session);
            });
  while (holders.listed.size() > kMaxListedHolders) {
    holders.unlisted_leases += holders.listed.back().leases;
    holders.listed.pop_back();
  }
  return holders;
}

absl::StatusOr<std::vector<Recommendation>> Broker::Advise(SessionId session,
                                                           const std::string& prefix) {
  MEMD_RETURN_IF_ERROR(ValidatePrefix(prefix));
  std::vector<BufferFacts> facts;
  AdviceRules rules;
  absl::Time now;
  {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    const uid_t uid = caller->peer.uid;
    now = clock_.Now();
    rules = advice_rules_;
    for (const auto& [name, id] : names_) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const Buffer& home = *buffers_.at(id);
      // Advice tells what others do with a buffer: only its owner (and
      // root) hear it.
      if (uid != 0 && home.info.owner_uid != uid) continue;
      BufferFacts& fact = facts.emplace_back();
      fact.name = name;
      fact.size = home.info.size;
      fact.home = home.info.location;
      fact.sealed = home.info.state == BufferState::kSealed;
      fact.counted_since = std::max(home.info.created, started_);
      fact.usage = tracker_.Of(id);
      fact.activity = tracker_.Activity(id, now);
      for (const ReplicaInfo& copy : ViewLocked(home).replicas) {
        fact.replicas.push_back(ReplicaFacts{copy.report.location, copy.bytes,
                                             copy.report.readers + copy.report.writers > 0});
      }
    }
  }
  return broker::Advise(facts, prefix, now, rules);
}

void Broker::SetAdviceRules(const AdviceRules& rules) {
  absl::MutexLock lock(&mu_);
  advice_rules_ = rules;
}

absl::StatusOr<std::vector<SessionInfo>> Broker::Sessions(SessionId session) {
  std::vector<SessionInfo> listed;
  {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    for (const auto& [id, other] : sessions_) {
      if (caller->peer.uid != 0 && other.peer.uid != caller->peer.uid) continue;
      listed.push_back(SessionInfo{id, other.peer.pid, other.peer.uid,
                                   other.peer.gid, other.command,
                                   static_cast<std::uint32_t>(other.leases.size()),
                                   other.started, usage_.session_total(id)});
    }
  }
  // Ids say nothing of order (OpaqueIds): oldest first.
  std::sort(listed.begin(), listed.end(), [](const SessionInfo& a, const SessionInfo& b) {
    return std::tie(a.started, a.id) < std::tie(b.started, b.id);
  });
  return listed;
}

absl::StatusOr<std::vector<UidUsage>> Broker::Usage(SessionId session) const {
  absl::MutexLock lock(&mu_);
  std::optional<uid_t> only;
  if (session != 0) {
    auto caller = sessions_.find(session);
    if (caller == sessions_.end()) {
      return absl::UnauthenticatedError(
          absl::StrCat("session ", session, " has ended; reconnect"));
    }
    if (caller->second.peer.uid != 0) only = caller->second.peer.uid;
  }
  return UsageLocked(only);
}

std::vector<UidUsage> Broker::UsageLocked(std::optional<uid_t> only) const {
  std::vector<UidUsage> usage;
  for (const auto& [key, held] : usage_.by_uid()) {
    const auto& [uid, location] = key;
    if (only.has_value() && uid != *only) continue;
    usage.push_back(UidUsage{uid, location, held.bytes, held.buffers,
                             limits_.max_uid_bytes.For(location)});
  }
  std::sort(usage.begin(), usage.end(), [](const UidUsage& a, const UidUsage& b) {
    return std::make_tuple(a.uid, a.location.kind, a.location.device) <
           std::make_tuple(b.uid, b.location.kind, b.location.device);
  });
  return usage;
}

BrokerCounts Broker::Counts() const {
  absl::MutexLock lock(&mu_);
  return CountsLocked();
}

GraceCounts Broker::Grace() const {
  absl::MutexLock lock(&mu_);
  GraceCounts grace;
  grace.on = in_grace_;
  for (const auto& [id, buffer] : buffers_) {
    if (buffer->awaiting_holders) ++grace.awaiting_holders;
  }
  grace.reclaimable_leases = reclaimable_.size();
  return grace;
}

BrokerCounts Broker::CountsOf(uid_t uid) const {
  absl::MutexLock lock(&mu_);
  BrokerCounts counts;
  counts.buffers = uid_counts_.Of(uid, UidCounts::Kind::kBuffers);
  counts.sessions = uid_counts_.Of(uid, UidCounts::Kind::kSessions);
  counts.leases = uid_counts_.Of(uid, UidCounts::Kind::kLeases);
  counts.waits = waiters_.waits_of_uid(uid);
  counts.memory_waits = memory_queue_.ByLocation(uid);
  return counts;
}

std::map<std::string, PressureCounts> Broker::Pressure() const {
  absl::MutexLock lock(&mu_);
  return pressure_;
}

BrokerSnapshot Broker::Snapshot() const {
  BrokerSnapshot snapshot;
  LeakFacts facts;
  absl::Time now;
  {
    absl::MutexLock lock(&mu_);
    snapshot.counts = CountsLocked();
    snapshot.usage = UsageLocked(std::nullopt);
    facts = LeakFactsLocked(std::nullopt);
    now = clock_.Now();
  }
  // Judged outside the lock: the facts are of the same moment already.
  snapshot.leaks = CountLeaks(facts, now);
  return snapshot;
}

BrokerCounts Broker::CountsLocked() const {
  BrokerCounts counts;
  for (SyncState state : {SyncState::kHostOnly, SyncState::kDeviceOnly, SyncState::kSynchronized,
                          SyncState::kHostDirty, SyncState::kDeviceDirty, SyncState::kMixed}) {
    counts.by_sync_state[std::string(SyncStateName(state))] = 0;
  }
  for (const auto& [id, buffer] : buffers_) {
    if (buffer->is_copy) {
      ++counts.replicas;
      continue;
    }
    if (!buffer->info.unlinked && buffer->replicas.has_value()) {
      ++counts.by_sync_state[std::string(SyncStateName(buffer->replicas->State()))];
    }
    ++counts.buffers;
    if (buffer->info.unlinked) {
      ++counts.unlinked;
    } else if (buffer->info.state == BufferState::kSealed) {
      ++counts.sealed;
    } else {
      ++counts.creating;
    }
  }
  counts.replica_copies = replica_copies_;
  counts.replica_bytes_copied = replica_bytes_copied_;
  counts.copies_avoided = copies_avoided_;
  counts.pressure = pressure_;
  counts.sessions = sessions_.size();
  counts.leases = leases_.size();
  counts.waits = waiters_.size();
  counts.memory_waits = memory_queue_.ByLocation();
  counts.rejections = rejections_;
  counts.rejections.waits_per_session = waiters_.rejections().per_session;
  counts.rejections.waits_per_uid = waiters_.rejections().per_uid;
  counts.rejections.waits = waiters_.rejections().total;
  counts.rejections.quotas = usage_.rejections();
  return counts;
}

}  // namespace memd::broker
