// Broker: a named buffer's copies at other locations (docs/design.md,
// "Replicas"): serving an open where a copy is, making one where none is,
// refreshing stale ones, dropping them, and what Stat shows of them. The
// decisions are the home's ReplicaSet's; this file keeps the records, the
// charges and the waits in step with them.

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/broker_messages.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {
namespace {

// The payload of an open refused only for want of a wake (OpenWouldWait).
constexpr char kWouldWait[] = "type.memd.dev/broker.OpenWouldWait";

absl::Status WouldWait(absl::Status status) {
  status.SetPayload(kWouldWait, absl::Cord("1"));
  return status;
}

}  // namespace

bool OpenWouldWait(const absl::Status& status) {
  return status.GetPayload(kWouldWait).has_value();
}

void Broker::SetReplicaCopier(ReplicaCopier* copier) {
  absl::MutexLock lock(&mu_);
  copier_ = copier;
}

Broker::Buffer* Broker::RecordAtLocked(Buffer& home, const Location& at) {
  if (at == home.info.location) return &home;
  auto it = home.copies.find(at);
  return it == home.copies.end() ? nullptr : buffers_.at(it->second).get();
}

Broker::Buffer* Broker::HomeOfLocked(Buffer& record) {
  if (record.replicas.has_value()) return &record;
  if (!record.is_copy || record.home == 0) return nullptr;
  auto it = buffers_.find(record.home);
  return it == buffers_.end() ? nullptr : it->second.get();
}

void Broker::CountLeaseLocked(Buffer& record, Access access, bool added) {
  Buffer* home = HomeOfLocked(record);
  if (home == nullptr || !home->replicas.has_value()) return;
  ReplicaSet& set = *home->replicas;
  const Location& at = record.info.location;
  const bool writes = access == Access::kReadWrite;
  // Grants come only where the set said "serve", and releases match them,
  // so these succeed; leases re-claimed after a restart into a fresh set
  // may not fit it (a writer beside readers), and are then not counted:
  // the set only ever counts fewer holders than there are, never frees or
  // refills a copy someone holds (the record's own lease count decides).
  absl::Status counted = added ? (writes ? set.AddWriter(at) : set.AddReader(at))
                               : (writes ? set.RemoveWriter(at) : set.RemoveReader(at));
  counted.IgnoreError();
}

std::uint32_t Broker::TotalLeasesLocked(const Buffer& home) const {
  std::uint32_t total = home.info.lease_count;
  for (const auto& [at, id] : home.copies) total += buffers_.at(id)->info.lease_count;
  return total;
}

int Broker::ClientWritersLocked(const Buffer& home) {
  int writers = home.pin->writers();
  if (!home.replicas.has_value()) return writers;
  for (const ReplicaReport& replica : home.replicas->Replicas()) {
    if (replica.writers == 0 || replica.location == home.info.location) continue;
    auto it = home.copies.find(replica.location);
    if (it != home.copies.end()) writers += buffers_.at(it->second)->pin->writers();
  }
  return writers;
}

bool Broker::HomeCurrentLocked(const Buffer& home) {
  if (!home.replicas.has_value()) return true;
  for (const ReplicaReport& replica : home.replicas->Replicas()) {
    if (replica.location == home.info.location) return replica.state == ReplicaState::kCurrent;
  }
  return true;
}

void Broker::OrphanLocked(Buffer& copy, AfterUnlock& after) {
  copy.home = 0;
  copy.info.unlinked = true;
  JournalLocked(copy);
  FreeIfUnusedLocked(copy.info.id, after);
}

BufferInfo Broker::ViewLocked(const Buffer& home) const {
  BufferInfo view = home.info;
  view.lease_count = TotalLeasesLocked(home);
  view.usage = tracker_.Of(home.info.id);
  if (!home.replicas.has_value()) return view;
  const ReplicaSet& set = *home.replicas;
  for (const ReplicaReport& report : set.Replicas()) {
    const Buffer* record = &home;
    if (!(report.location == home.info.location)) {
      auto it = home.copies.find(report.location);
      if (it == home.copies.end()) continue;  // Not reached: the set and the map agree.
      record = buffers_.at(it->second).get();
    }
    view.replicas.push_back(ReplicaInfo{report, record->allocation.bytes, record->charge.uid});
  }
  view.sync_state = std::string(SyncStateName(set.State()));
  view.generation = set.generation();
  if (const auto& failure = set.last_failure(); failure.has_value()) {
    view.fill_failure = absl::StrCat("copy to ", failure->at.ToString(), " (generation ",
                                     failure->generation, ") failed: ",
                                     failure->status.ToString());
  }
  return view;
}

absl::StatusOr<std::optional<Grant>> Broker::OpenAtLocked(
    SessionId session, Session& caller, Buffer& home, const OpenParams& params,
    WatchId watch, std::function<void()>* wake, AfterUnlock* after,
    std::optional<NewCopy>* need) {
  const std::string& name = home.info.name;
  const Location at = params.location.value_or(home.info.location);
  pool::Pool* pool = pools_.Find(at);
  if (pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("location ", at.ToString(),
                                                   " is not available on this node (available: ",
                                                   pools_.LocationNames(), ")"));
  }
  // A fill this open started failed: it ends with that, rather than start
  // another that would fail the same way.
  if (auto failed = failed_fills_.find(watch); watch != 0 && failed != failed_fills_.end()) {
    absl::Status status = std::move(failed->second.status);
    failed_fills_.erase(failed);
    return status;
  }
  if (!home.replicas.has_value()) {
    return absl::InternalError(absl::StrCat("buffer ", Quoted(name), " keeps no copies"));
  }
  ReplicaSet& set = *home.replicas;
  MEMD_ASSIGN_OR_RETURN(OpenPlan plan, set.PlanOpen(at, params.access == Access::kReadWrite));
  const bool may_wait = wake != nullptr && *wake;
  auto wait = [&]() -> absl::StatusOr<std::optional<Grant>> {
    MEMD_RETURN_IF_ERROR(
        waiters_.Add(watch, session, caller.peer.uid, name, std::move(*wake), limits_));
    return std::nullopt;
  };
  switch (plan.action) {
    case OpenPlan::Action::kServe: {
      Buffer& record = *RecordAtLocked(home, at);
      if (!params.lease) {
        Grant made;
        made.buffer = ViewLocked(home);
        return std::optional<Grant>(std::move(made));
      }
      // Built where it is returned: the grant is moved once, not four times.
      absl::StatusOr<std::optional<Grant>> served(absl::in_place, std::in_place);
      Grant& grant = **served;
      MEMD_RETURN_IF_ERROR(GrantIntoLocked(session, caller, record, params.access, grant));
      JournalLeaseLocked(grant, session);
      if (params.notify_freed && record.info.location.kind == Location::Kind::kDevice) {
        caller.notify_freed.insert(record.info.id);
        record.notify_on_free.insert(session);
      }
      // Away from home, a copy that was there already (not the one this
      // open's own fill made) spared a copy.
      const bool avoided = &record != &home && (watch == 0 || record.filled_for != watch);
      tracker_.Opened(home.info.id, at, caller.peer.uid, clock_.Now(), avoided);
      if (avoided) ++copies_avoided_;
      return served;
    }
    case OpenPlan::Action::kWait:
      if (!may_wait) {
        return WouldWait(absl::UnavailableError(absl::StrCat(
            "a copy of buffer ", Quoted(name), " to ", at.ToString(),
            " is being made; open it with a wait timeout to wait for it")));
      }
      return wait();
    case OpenPlan::Action::kBusy:
      if (!may_wait) {
        return WouldWait(absl::UnavailableError(absl::StrCat(
            "the copy of buffer ", Quoted(name), " at ", at.ToString(),
            " is out of date and others hold it, so it cannot be refreshed under them; "
            "open it with a wait timeout, or at a location whose copy is current")));
      }
      return wait();
    case OpenPlan::Action::kFill:
      break;
  }
  if (!may_wait || after == nullptr) {
    return WouldWait(absl::FailedPreconditionError(absl::StrCat(
        "buffer ", Quoted(name), " has no current copy at ", at.ToString(),
        "; open it there with a wait timeout (or prefetch it) to have one made")));
  }
  if (copier_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", Quoted(name), " has no current copy at ", at.ToString(),
        " and this daemon runs no transfer engine to make one"));
  }
  if (Buffer* stale = RecordAtLocked(home, at); stale != nullptr) {
    // Refreshed in place: its memory is there, and charged already.
    MEMD_RETURN_IF_ERROR(
        waiters_.Add(watch, session, caller.peer.uid, name, std::move(*wake), limits_));
    absl::StatusOr<FillTicket> ticket = set.BeginFill(at);
    if (!ticket.ok()) {
      waiters_.Cancel(watch);
      return ticket.status();
    }
    QueueFillLocked(home, *stale, *ticket, session, caller.peer.uid, watch, *after);
    return std::nullopt;
  }
  if (need == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", Quoted(name), " has no copy at ", at.ToString(), "; open it there"));
  }
  // Checked before allocating, and again (and charged) once allocated.
  const std::uint64_t bytes = pool->AllocationBytes(home.info.size);
  MEMD_RETURN_IF_ERROR(AdmitLocked(session, caller,
                                   CreateParams{.name = name, .size = home.info.size, .location = at},
                                   bytes));
  // The copy is the same buffer: open to the same clients, in its domain.
  *need = NewCopy{home.info.id, at, pool,
                  pool::Domain{home.info.owner_uid, home.info.owner_gid, home.info.mode},
                  home.info.size, caller.peer.uid};
  return std::nullopt;
}

absl::Status Broker::AddCopyLocked(SessionId session, const NewCopy& need,
                                   pool::Allocation allocation, WatchId watch,
                                   std::function<void()>& wake, AfterUnlock& after) {
  auto record = std::make_unique<Buffer>();
  record->pool = need.pool;
  record->allocation = std::move(allocation);
  auto give_back = [&](absl::Status status) {
    after.freed.emplace_back(need.pool, std::move(record));
    return status;
  };
  auto caller = FindSessionLocked(session);
  if (!caller.ok()) return give_back(caller.status());
  auto found = buffers_.find(need.home);
  Buffer* home = found == buffers_.end() ? nullptr : found->second.get();
  // Unlinked, or another opener made the copy first: look again.
  if (home == nullptr || home->info.unlinked || !home->replicas.has_value() ||
      RecordAtLocked(*home, need.at) != nullptr) {
    return give_back(absl::AbortedError(absl::StrCat(
        "buffer ", need.home, " changed while its copy to ", need.at.ToString(),
        " was allocated; try again")));
  }
  const CreateParams asked{.name = home->info.name, .size = home->info.size,
                           .location = need.at};
  if (absl::Status admitted = AdmitLocked(session, **caller, asked, record->allocation.bytes);
      !admitted.ok()) {
    return give_back(admitted);
  }
  const PeerCredentials& peer = (*caller)->peer;
  if (absl::Status waits =
          waiters_.Add(watch, session, peer.uid, home->info.name, std::move(wake), limits_);
      !waits.ok()) {
    return give_back(waits);
  }
  absl::StatusOr<FillTicket> ticket = home->replicas->BeginFill(need.at);
  if (!ticket.ok()) {
    waiters_.Cancel(watch);
    return give_back(ticket.status());
  }
  BufferInfo& info = record->info;
  info = home->info;
  do {
    info.id = buffer_ids_.Next();
  } while (buffers_.contains(info.id));
  info.location = need.at;
  info.lease_count = 0;
  record->is_copy = true;
  record->home = home->info.id;
  record->last_used = clock_.Now();
  record->pin = std::make_shared<CopyPin>([this, id = info.id] { CopiesLetGo(id); });
  // The uid that asked for the copy pays for it: opening someone's buffer
  // somewhere new costs the opener's quota, never the owner's.
  record->charge = Charge{peer.uid, session, peer.pid, need.at, record->allocation.bytes};
  usage_.Add(record->charge);
  uid_counts_.Add(peer.uid, UidCounts::Kind::kBuffers);
  Buffer& stored = *record;
  home->copies.emplace(need.at, info.id);
  buffers_.emplace(info.id, std::move(record));
  JournalLocked(stored);
  QueueFillLocked(*home, stored, *ticket, session, peer.uid, watch, after);
  return absl::OkStatus();
}

absl::StatusOr<CopyEnd> Broker::FillEndLocked(Buffer& record, bool destination) {
  MEMD_ASSIGN_OR_RETURN(backend::SegmentMemory memory, record.allocation.Memory());
  CopyEnd end;
  end.buffer = record.info;
  end.access = destination ? Access::kReadWrite : Access::kRead;
  end.memory = memory.At(0);
  end.hold = record.allocation.Hold();
  end.pin = std::make_shared<CopyClaim>(record.pin, destination);
  end.offset = 0;
  end.length = record.info.size;
  return end;
}

void Broker::QueueFillLocked(Buffer& home, Buffer& destination, FillTicket ticket,
                             SessionId session, uid_t uid, WatchId starter,
                             AfterUnlock& after) {
  FillStart fill{home.info.id, ticket, session, uid, starter, {}};
  Buffer* source = RecordAtLocked(home, ticket.source);
  absl::Status resolved =
      source == nullptr ? absl::InternalError("the fill's source copy is gone")
                        : absl::OkStatus();
  if (resolved.ok()) {
    absl::StatusOr<CopyEnd> from = FillEndLocked(*source, /*destination=*/false);
    absl::StatusOr<CopyEnd> to = FillEndLocked(destination, /*destination=*/true);
    resolved = !from.ok() ? from.status() : to.status();
    if (resolved.ok()) fill.ends = CopyEnds{std::move(*from), std::move(*to)};
  }
  if (!resolved.ok()) {
    // Never handed over: it ends here, like a copy that failed at once.
    SettleFillLocked(home.info.id, ticket, starter, session, resolved, after);
    return;
  }
  after.fills.push_back(std::move(fill));
}

void Broker::RefreshStaleLocked(Buffer& home, SessionId session, uid_t uid,
                                AfterUnlock& after) {
  if (copier_ == nullptr) return;  // They stay stale; an open there says why.
  for (const Location& at : home.replicas->SyncTargets()) {
    Buffer* stale = RecordAtLocked(home, at);
    if (stale == nullptr) continue;
    absl::StatusOr<FillTicket> ticket = home.replicas->BeginFill(at);
    if (ticket.ok()) QueueFillLocked(home, *stale, *ticket, session, uid, 0, after);
  }
}

void Broker::StartFill(FillStart fill) {
  ReplicaCopier* copier;
  {
    absl::MutexLock lock(&mu_);
    copier = copier_;
  }
  const BufferId home = fill.home;
  const FillTicket ticket = fill.ticket;
  const WatchId starter = fill.starter;
  const SessionId session = fill.session;
  absl::Status started =
      copier == nullptr
          ? absl::FailedPreconditionError("this daemon runs no transfer engine")
          : copier->Start(session, fill.uid, std::move(fill.ends),
                          [this, home, ticket, starter, session](const absl::Status& status) {
                            FinishFill(home, ticket, starter, session, status);
                          });
  if (!started.ok()) FinishFill(home, ticket, starter, session, started);
}

void Broker::FinishFill(BufferId home, const FillTicket& ticket, WatchId starter,
                        SessionId session, const absl::Status& status) {
  WithLock([&](AfterUnlock& after) {
    SettleFillLocked(home, ticket, starter, session, status, after);
  });
}

void Broker::SettleFillLocked(BufferId home_id, const FillTicket& ticket, WatchId starter,
                              SessionId session, const absl::Status& status,
                              AfterUnlock& after) {
  auto found = buffers_.find(home_id);
  // The buffer went, or was unlinked: its copies went their own way.
  if (found == buffers_.end() || found->second->info.unlinked ||
      !found->second->replicas.has_value()) {
    return;
  }
  Buffer& home = *found->second;
  absl::StatusOr<FillResult> result = home.replicas->FinishFill(ticket, status);
  if (!result.ok()) return;  // That copy was dropped meanwhile.
  if (!status.ok() && starter != 0 && waiters_.Has(starter)) {
    failed_fills_[starter] = FailedFill{
        session, absl::Status(status.code(), absl::StrCat("copying buffer ", Quoted(home.info.name),
                                                          " to ", ticket.at.ToString(),
                                                          " failed: ", status.message()))};
  }
  if (status.ok()) {
    tracker_.Copied(home.info.id, ticket.source, ticket.at, home.info.size, clock_.Now());
    ++replica_copies_;
    replica_bytes_copied_[std::string(CopyDirectionName(DirectionOf(ticket.source, ticket.at)))] +=
        home.info.size;
    if (Buffer* filled = RecordAtLocked(home, ticket.at); filled != nullptr) {
      filled->filled_for = starter;
    }
  }
  if (*result == FillResult::kRemoved) {
    auto copy = home.copies.find(ticket.at);
    if (copy != home.copies.end()) {
      Buffer& gone = *buffers_.at(copy->second);
      home.copies.erase(copy);
      OrphanLocked(gone, after);
    }
  }
  // The home caught up with a seal made through a copy: durable now.
  if (ticket.at == home.info.location) JournalLocked(home);
  after.Wake(waiters_.TakeName(home.info.name));
}

absl::StatusOr<BufferInfo> Broker::DropReplica(SessionId session, const std::string& name,
                                               const Location& at) {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(name));
  return WithLock([&](AfterUnlock& after) -> absl::StatusOr<BufferInfo> {
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    Buffer* home = FindNamedLocked(name);
    if (home == nullptr) {
      return absl::NotFoundError(absl::StrCat("no buffer named ", Quoted(name)));
    }
    const PeerCredentials& peer = caller->peer;
    if (!MayAccess(peer, home->info, Access::kRead)) {
      return absl::PermissionDeniedError(
          absl::StrCat("uid ", peer.uid, " may not read buffer ", Quoted(name)));
    }
    if (pools_.Find(at) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "location ", at.ToString(), " is not available on this node (available: ",
          pools_.LocationNames(), ")"));
    }
    if (at == home->info.location) {
      return absl::FailedPreconditionError(absl::StrCat(
          at.ToString(), " is the home of buffer ", Quoted(name),
          "; a home goes only with its buffer (unlink it)"));
    }
    Buffer* copy = RecordAtLocked(*home, at);
    if (copy == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("buffer ", Quoted(name), " has no copy at ", at.ToString()));
    }
    if (peer.uid != 0 && peer.uid != home->info.owner_uid && peer.uid != copy->charge.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          "uid ", peer.uid, " may not drop the copy of buffer ", Quoted(name), " at ",
          at.ToString(), ": only the buffer's owner (uid ", home->info.owner_uid,
          "), root and the uid it is charged to (uid ", copy->charge.uid, ") may"));
    }
    MEMD_RETURN_IF_ERROR(home->replicas->Drop(at));
    home->copies.erase(at);
    OrphanLocked(*copy, after);
    return ViewLocked(*home);
  });
}

absl::StatusOr<BufferInfo> Broker::Sync(SessionId session, LeaseId lease_id) {
  return WithLock([&](AfterUnlock& after) -> absl::StatusOr<BufferInfo> {
    MEMD_ASSIGN_OR_RETURN(Lease * lease, FindLeaseLocked(session, lease_id));
    Buffer& record = *buffers_.at(lease->buffer);
    Buffer* home = HomeOfLocked(record);
    const std::string& name = record.info.name;
    if (lease->access != Access::kReadWrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease ", lease_id, " on buffer ", Quoted(name),
          " is read-only; only a writer has bytes to publish"));
    }
    if (home == nullptr || home->info.unlinked) {
      return absl::FailedPreconditionError(
          absl::StrCat("buffer ", Quoted(name), " was unlinked; nobody can open its copies"));
    }
    if (home->info.state == BufferState::kSealed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "buffer ", Quoted(name), " is sealed: its seal published its bytes already"));
    }
    MEMD_RETURN_IF_ERROR(home->replicas->Written(record.info.location));
    RefreshStaleLocked(*home, session, lease->uid, after);
    JournalLocked(*home);
    return ViewLocked(*home);
  });
}

}  // namespace memd::broker
