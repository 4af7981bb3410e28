// The broker's sessions: their start and end, and finding a session's
// session and lease records.

#include "daemon/broker/broker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/broker/broker_messages.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {

absl::StatusOr<SessionId> Broker::StartSession(const PeerCredentials& peer,
                                               std::string command,
                                               const std::string& token_digest) {
  absl::MutexLock lock(&mu_);
  if (absl::Status admitted = uid_counts_.Admit(peer.uid, UidCounts::Kind::kSessions,
                                            limits_.max_sessions_per_uid);
      !admitted.ok()) {
    ++rejections_.sessions_per_uid;
    return admitted;
  }
  if (sessions_.size() >= limits_.max_sessions) {
    ++rejections_.sessions;
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many sessions: ", sessions_.size(), " are open; the limit is ",
        limits_.max_sessions, " (max_sessions)"));
  }
  // A dead session's id stays its own until the grace period ends: the
  // state names its leases by it.
  SessionId id;
  do {
    id = session_ids_.Next();
  } while (sessions_.contains(id) || dead_sessions_.contains(id));
  uid_counts_.Add(peer.uid, UidCounts::Kind::kSessions);
  sessions_.emplace(id, Session{peer, std::move(command), clock_.Now(), {}, {}, {}});
  if (journal_ != nullptr) journal_->SessionStarted(id, peer.uid, token_digest);
  return id;
}

void Broker::EndSession(SessionId session) {
  WithLock([&](AfterUnlock& after) {
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return;
    // One record for the session and its leases, before what their ends
    // do to buffers.
    if (journal_ != nullptr) journal_->SessionEnded(session);
    // Nobody is left to tell of the buffers it kept imports of.
    for (BufferId kept : it->second.notify_freed) {
      if (auto buffer = buffers_.find(kept); buffer != buffers_.end()) {
        buffer->second->notify_on_free.erase(session);
      }
    }
    std::vector<LeaseId> leases(it->second.leases.begin(), it->second.leases.end());
    for (LeaseId lease : leases) ReleaseLocked(lease, after, /*journal=*/false);
    usage_.ForgetSession(session);
    absl::erase_if(failed_fills_,
                   [&](const auto& entry) { return entry.second.session == session; });
    // Woken, their opens try again and fail: the session is gone.
    after.Wake(waiters_.TakeSession(session));
    std::vector<WatchId> creates;
    for (const auto& [watch, wait] : memory_waits_) {
      if (wait.session == session) creates.push_back(watch);
    }
    for (WatchId watch : creates) ForgetMemoryWaitLocked(watch);
    for (auto& [id, segment] : it->second.replayable) {
      after.let_go.push_back(std::move(segment));
    }
    const uid_t uid = it->second.peer.uid;
    sessions_.erase(it);
    uid_counts_.Remove(uid, UidCounts::Kind::kSessions);
  });
}

absl::StatusOr<Broker::Session*> Broker::FindSessionLocked(SessionId session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat("session ", session, " has ended; reconnect"));
  }
  return &it->second;
}

absl::StatusOr<Broker::Lease*> Broker::FindLeaseLocked(SessionId session,
                                                       LeaseId lease_id) {
  MEMD_RETURN_IF_ERROR(FindSessionLocked(session).status());
  auto lease = leases_.find(lease_id);
  // Another session's lease is as unknown to this one as a made-up id.
  if (lease == leases_.end() || lease->second.session != session) {
    return absl::NotFoundError(absl::StrCat(
        "lease ", lease_id, " is not held by this session (released already, "
        "or never granted)"));
  }
  return &lease->second;
}

}  // namespace memd::broker
