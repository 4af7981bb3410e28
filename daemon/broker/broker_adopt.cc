// Durable recovery's side of the broker: buffers a previous memd left, taken
// back with the ids, names and owners they had, and the grace period in
// which their holders may come back (docs/design.md, "Durability").

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/broker/broker.h"
#include "common/status_macros.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {
namespace {

// Whether a holder may come back for the buffer: a sealed, persistent,
// linked buffer lives without one; every other kind went with its last
// lease, which the recovery cannot tell from one about to be re-claimed.
bool AwaitsHolders(const BufferInfo& info) {
  return info.unlinked || info.persistence == Persistence::kEphemeral ||
         info.state != BufferState::kSealed;
}

// Compares two digests in time that does not depend on where they differ.
bool SameDigest(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return differ == 0;
}

}  // namespace

absl::Status Broker::Adopt(std::vector<AdoptedBuffer> buffers,
                           std::vector<AdoptedSession> sessions,
                           std::vector<AdoptedLease> leases) {
  return WithLock([&](AfterUnlock& after) -> absl::Status {
    auto refuse = [&](absl::Status status) {
      for (AdoptedBuffer& adopted : buffers) {
        pool::Pool* pool = pools_.Find(adopted.info.location);
        if (pool == nullptr) continue;  // Not this broker's to free.
        auto buffer = std::make_unique<Buffer>();
        buffer->allocation = std::move(adopted.allocation);
        after.freed.emplace_back(pool, std::move(buffer));
      }
      return status;
    };
    if (!sessions_.empty() || !buffers_.empty()) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "buffers are adopted before anything else: ", sessions_.size(), " sessions and ",
          buffers_.size(), " buffers exist already")));
    }
    absl::flat_hash_set<BufferId> ids;
    absl::flat_hash_set<std::string> names;
    for (const AdoptedBuffer& adopted : buffers) {
      const BufferInfo& info = adopted.info;
      if (info.id == 0 || !ids.insert(info.id).second) {
        return refuse(absl::InvalidArgumentError(
            absl::StrCat("adopted buffer '", info.name, "' has id ", info.id,
                         ", which is 0 or another adopted buffer's")));
      }
      if (!info.unlinked && !names.insert(info.name).second) {
        return refuse(absl::InvalidArgumentError(
            absl::StrCat("two adopted buffers are named '", info.name, "'")));
      }
      if (pools_.Find(info.location) == nullptr) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "adopted buffer '", info.name, "' lives at ", info.location.ToString(),
            ", which this memd does not serve (it serves ", pools_.LocationNames(), ")")));
      }
    }
    absl::flat_hash_set<SessionId> session_ids;
    for (const AdoptedSession& session : sessions) {
      if (session.id == 0 || !session_ids.insert(session.id).second) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "adopted session ", session.id, " is 0 or another adopted session's id")));
      }
    }
    absl::flat_hash_set<LeaseId> lease_ids;
    absl::flat_hash_set<BufferId> leased;
    for (const AdoptedLease& lease : leases) {
      if (lease.id == 0 || !lease_ids.insert(lease.id).second ||
          !session_ids.contains(lease.session) || !ids.contains(lease.buffer)) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "adopted lease ", lease.id, " (session ", lease.session, ", buffer ", lease.buffer,
            ") is 0, given twice, or of a session or buffer not adopted")));
      }
      leased.insert(lease.buffer);
    }
    for (AdoptedBuffer& adopted : buffers) {
      auto buffer = std::make_unique<Buffer>();
      buffer->info = std::move(adopted.info);
      buffer->info.lease_count = 0;
      buffer->pool = pools_.Find(buffer->info.location);
      buffer->allocation = std::move(adopted.allocation);
      // A buffer someone held waits for them: they may still map it.
      buffer->awaiting_holders = AwaitsHolders(buffer->info) || leased.contains(buffer->info.id);
      const BufferInfo& info = buffer->info;
      buffer->pin = std::make_shared<CopyPin>([this, id = info.id] { CopiesLetGo(id); });
      // Charged to no session: the one that created it is gone.
      buffer->charge = Charge{info.owner_uid, 0, info.creator_pid, info.location,
                              buffer->allocation.bytes};
      usage_.Add(buffer->charge);
      uid_counts_.Add(info.owner_uid, UidCounts::Kind::kBuffers);
      if (!info.unlinked) {
        names_.emplace(info.name, info.id);
        // Copies do not survive a restart as copies: the home starts alone.
        buffer->replicas = ReplicaSet::Created(info.location, kMaxReplicas).value();
      }
      in_grace_ = in_grace_ || buffer->awaiting_holders;
      buffers_.emplace(info.id, std::move(buffer));
    }
    for (AdoptedSession& session : sessions) {
      dead_sessions_.emplace(session.id, std::move(session));
    }
    for (const AdoptedLease& lease : leases) reclaimable_.emplace(lease.id, lease);
    adopted_at_ = clock_.Now();
    in_grace_ = in_grace_ || !dead_sessions_.empty();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<Broker::ReclaimOutcome>> Broker::Reclaim(
    SessionId session, const std::string& previous_token_digest,
    const std::vector<LeaseId>& leases) {
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
  // Bounds the work one call does under the mutex, and its reply.
  const std::uint64_t most = std::min<std::uint64_t>(kMaxLeasesPerReclaim,
                                                     limits_.max_leases_per_session);
  if (leases.size() > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        leases.size(), " leases to re-claim in one call; at most ", most,
        " (a session holds at most max_leases_per_session = ", limits_.max_leases_per_session,
        "; a call names at most ", kMaxLeasesPerReclaim, ")"));
  }
  absl::flat_hash_set<LeaseId> asked;
  for (LeaseId id : leases) {
    if (!asked.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("lease ", id, " is asked for twice"));
    }
  }
  const uid_t uid = caller->peer.uid;
  std::vector<ReclaimOutcome> outcomes;
  outcomes.reserve(leases.size());
  for (LeaseId id : leases) {
    auto lease = reclaimable_.find(id);
    const AdoptedSession* held_by = nullptr;
    if (lease != reclaimable_.end()) {
      auto dead = dead_sessions_.find(lease->second.session);
      if (dead != dead_sessions_.end()) held_by = &dead->second;
    }
    // Root too proves the token and its uid: a re-claim is never a way
    // into a lease someone else held.
    if (held_by == nullptr || held_by->uid != uid || held_by->token_digest.empty() ||
        !SameDigest(held_by->token_digest, previous_token_digest)) {
      outcomes.push_back({id, absl::NotFoundError(absl::StrCat(
                                  "lease ", id, " is no lease an earlier session of uid ", uid,
                                  " held with that token (never held, re-claimed already, "
                                  "or the grace period is over)"))});
      continue;
    }
    if (caller->leases.size() >= limits_.max_leases_per_session) {
      ++rejections_.leases_per_session;
      outcomes.push_back({id, absl::ResourceExhaustedError(absl::StrCat(
                                  "session ", session, " holds ", caller->leases.size(),
                                  " leases; the limit is ", limits_.max_leases_per_session,
                                  " (max_leases_per_session)"))});
      continue;
    }
    if (absl::Status admitted =
            uid_counts_.Admit(uid, UidCounts::Kind::kLeases, limits_.max_leases_per_uid);
        !admitted.ok()) {
      ++rejections_.leases_per_uid;
      outcomes.push_back({id, admitted});
      continue;
    }
    const AdoptedLease claimed = lease->second;
    reclaimable_.erase(lease);
    leases_.emplace(id, Lease{session, claimed.buffer, claimed.access, uid, adopted_at_});
    uid_counts_.Add(uid, UidCounts::Kind::kLeases);
    caller->leases.insert(id);
    Buffer& record = *buffers_.at(claimed.buffer);
    record.leases.insert(id);
    ++record.info.lease_count;
    CountLeaseLocked(record, claimed.access, /*added=*/true);
    if (journal_ != nullptr) journal_->LeaseGranted(id, session, claimed.buffer, claimed.access);
    outcomes.push_back({id, absl::OkStatus()});
  }
  return outcomes;
}

std::uint64_t Broker::EndGrace() {
  return WithLock([&](AfterUnlock& after) -> std::uint64_t {
    if (!in_grace_) return 0;
    in_grace_ = false;
    // The state drops each dead session with the leases nobody re-claimed.
    if (journal_ != nullptr) {
      for (const auto& [id, session] : dead_sessions_) journal_->SessionEnded(id);
    }
    dead_sessions_.clear();
    reclaimable_.clear();
    std::vector<Buffer*> waiting;
    for (auto& [id, buffer] : buffers_) {
      if (buffer->awaiting_holders) waiting.push_back(buffer.get());
    }
    std::uint64_t gone = 0;
    for (Buffer* buffer : waiting) {
      buffer->awaiting_holders = false;
      if (buffer->info.lease_count > 0) continue;  // Re-claimed.
      ++gone;
      LastLeaseEndedLocked(*buffer, after);
    }
    return gone;
  });
}

}  // namespace memd::broker
