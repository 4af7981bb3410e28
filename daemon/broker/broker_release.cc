// The end of a buffer's use: a lease released, a name unlinked, memory
// freed once nothing holds it, and what is journaled of each.

#include "daemon/broker/broker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "daemon/broker/broker_messages.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {

absl::Status Broker::Release(SessionId session, LeaseId lease_id) {
  return WithLock([&](AfterUnlock& after) -> absl::Status {
    MEMD_RETURN_IF_ERROR(FindLeaseLocked(session, lease_id).status());
    ReleaseLocked(lease_id, after);
    return absl::OkStatus();
  });
}

void Broker::ReleaseLocked(LeaseId lease_id, AfterUnlock& after, bool journal) {
  auto lease = leases_.find(lease_id);
  Lease released = lease->second;
  leases_.erase(lease);
  if (journal && journal_ != nullptr) journal_->LeaseEnded(lease_id);
  auto session = sessions_.find(released.session);
  if (session != sessions_.end()) session->second.leases.erase(lease_id);
  uid_counts_.Remove(released.uid, UidCounts::Kind::kLeases);
  Buffer& record = *buffers_.at(released.buffer);
  record.leases.erase(lease_id);
  --record.info.lease_count;
  CountLeaseLocked(record, released.access, /*added=*/false);
  // What the last lease does is the buffer's: its leases at every copy.
  Buffer* home = HomeOfLocked(record);
  if (home == nullptr) {  // An orphaned copy.
    if (record.info.lease_count == 0) FreeIfUnusedLocked(record.info.id, after);
    return;
  }
  if (TotalLeasesLocked(*home) > 0) return;
  LastLeaseEndedLocked(*home, after);
}

void Broker::LastLeaseEndedLocked(Buffer& buffer, AfterUnlock& after) {
  // Ephemeral buffers go, and so do buffers nobody sealed, since nobody is
  // left who could finish writing them.
  if (!buffer.info.unlinked &&
      (buffer.info.persistence == Persistence::kEphemeral ||
       buffer.info.state != BufferState::kSealed)) {
    UnlinkLocked(buffer, after);
    return;
  }
  FreeIfUnusedLocked(buffer.info.id, after);
}

void Broker::UnlinkLocked(Buffer& buffer, AfterUnlock& after) {
  names_.erase(buffer.info.name);
  buffer.info.unlinked = true;
  // Whoever watches the name tries again: a copy waiting for memory ends
  // (no buffer, or another of that name), an open waiting for a seal waits on.
  after.Wake(waiters_.TakeName(buffer.info.name));
  // Its copies go as the home does: when nothing holds them any more.
  for (auto& [at, id] : buffer.copies) OrphanLocked(*buffers_.at(id), after);
  buffer.copies.clear();
  JournalLocked(buffer);
  FreeIfUnusedLocked(buffer.info.id, after);
}

void Broker::JournalLocked(const Buffer& buffer) {
  if (journal_ == nullptr) return;
  if (buffer.is_copy) {
    // A restart keeps a copy only for holders who re-claim its leases: as
    // an unlinked buffer, which goes with its last lease.
    BufferInfo info = buffer.info;
    info.unlinked = true;
    journal_->BufferChanged(info, buffer.allocation);
    return;
  }
  if (buffer.info.state == BufferState::kSealed && !HomeCurrentLocked(buffer)) {
    // Sealed through a copy whose bytes the home has not caught up with: a
    // restart now must not serve the home's old bytes under the sealed
    // name, so the state calls it unsealed (a restart drops it) until the
    // home's refresh ends (FinishFill journals it again).
    BufferInfo info = buffer.info;
    info.state = BufferState::kCreating;
    info.sealed.reset();
    journal_->BufferChanged(info, buffer.allocation);
    return;
  }
  journal_->BufferChanged(buffer.info, buffer.allocation);
}

void Broker::JournalLeaseLocked(const Grant& grant, SessionId session) {
  if (journal_ != nullptr) {
    journal_->LeaseGranted(grant.lease, session, grant.buffer.id, grant.access);
  }
}

void Broker::FreeIfUnusedLocked(BufferId id, AfterUnlock& after) {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) return;
  Buffer& buffer = *it->second;
  if (!buffer.info.unlinked || buffer.info.lease_count > 0) return;
  if (buffer.pin->claims() > 0) {
    // Copies may still reach its bytes: it stays, charged to its owner,
    // until the last lets go (CopiesLetGo). Nobody can read a parked
    // buffer, so what copies would still write it is wasted: cancelled.
    if (!buffer.parked && buffer.pin->writers() > 0) {
      after.freed_while_written.push_back(id);
      after.on_freed_while_written = on_freed_while_written_;
    }
    buffer.parked = true;
    return;
  }
  // Adopted buffers wait for their holders until the grace period ends.
  if (buffer.awaiting_holders) return;
  // Clients that keep their import of it let go once told.
  for (SessionId told : buffer.notify_on_free) {
    if (auto holder = sessions_.find(told); holder != sessions_.end()) {
      holder->second.notify_freed.erase(id);
    }
    after.freed_notices[told].push_back(id);
    after.on_freed_notice = on_freed_notice_;
  }
  if (journal_ != nullptr) journal_->BufferFreed(id);
  if (!buffer.is_copy) tracker_.Forget(id);
  pool::Pool* pool = it->second->pool;
  usage_.Remove(it->second->charge);
  // The uid it was counted against: the owner, or for a copy whoever asked.
  uid_counts_.Remove(it->second->charge.uid, UidCounts::Kind::kBuffers);
  after.freed.emplace_back(pool, std::move(it->second));
  buffers_.erase(it);
}

void Broker::CopiesLetGo(BufferId id) {
  WithLock([&](AfterUnlock& after) { FreeIfUnusedLocked(id, after); });
}

absl::Status Broker::Unlink(SessionId session, const std::string& name,
                            std::uint64_t expected_id) {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(name));
  return WithLock([&](AfterUnlock& after) -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    Buffer* buffer = FindNamedLocked(name);
    if (buffer == nullptr) {
      return absl::NotFoundError(absl::StrCat("no buffer named ", Quoted(name)));
    }
    if (caller->peer.uid != 0 && caller->peer.uid != buffer->info.owner_uid) {
      return PermissionDenied(caller->peer, buffer->info,
                              "unlink", "only its owner and root may");
    }
    if (expected_id != 0 && buffer->info.id != expected_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          Quoted(name), " now names buffer ", buffer->info.id, ", not buffer ", expected_id,
          " that was asked for (it was re-created since): not unlinked"));
    }
    UnlinkLocked(*buffer, after);
    return absl::OkStatus();
  });
}

}  // namespace memd::broker
