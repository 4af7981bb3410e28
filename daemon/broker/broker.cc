#include "daemon/broker/broker.h"

#include <cassert>
#include <type_traits>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"
#include "common/names.h"
#include "common/status_macros.h"
#include "daemon/broker/broker_messages.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {
namespace {

// The payload of a Seal refusal that copies still write the buffer: its id.
constexpr char kCopiesStillWrite[] = "type.memd.dev/broker.CopiesStillWrite";

}  // namespace

std::optional<BufferId> BufferCopiesStillWrite(const absl::Status& status) {
  const absl::optional<absl::Cord> payload = status.GetPayload(kCopiesStillWrite);
  BufferId id = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &id)) return std::nullopt;
  return id;
}

void Broker::AfterUnlock::Run() && {
  // Waiting creates are rare: only for them are the places noted and the
  // lock taken again.
  const bool creates_wait = broker != nullptr && broker->memory_waiting_.load() > 0;
  std::vector<Location> freed_at;
  for (auto& [pool, buffer] : freed) {
    pool->Free(std::move(buffer->allocation));
    if (creates_wait) freed_at.push_back(pool->location());
  }
  freed.clear();
  if (!freed_at.empty()) broker->MemoryFreed(freed_at);
  for (FillStart& fill : fills) broker->StartFill(std::move(fill));
  fills.clear();
  for (auto& wake : wakes) wake();
  wakes.clear();
  if (on_freed_while_written) {
    for (BufferId id : freed_while_written) on_freed_while_written(id);
  }
  freed_while_written.clear();
  if (on_freed_notice) {
    for (const auto& [session, ids] : freed_notices) on_freed_notice(session, ids);
  }
  freed_notices.clear();
  if (on_pressure) {
    for (const std::string& line : pressure_lines) on_pressure(line);
  }
  pressure_lines.clear();
  let_go.clear();
}

void Broker::AfterUnlock::Wake(std::vector<std::function<void()>> more) {
  for (auto& wake : more) wakes.push_back(std::move(wake));
}

Broker::AfterUnlock::~AfterUnlock() {
  assert(empty() && "an AfterUnlock was filled but never run");
}

Broker::Broker(pool::PoolSet& pools, BrokerLimits limits, const Clock& clock)
    : pools_(pools), limits_(limits), clock_(clock), started_(clock.Now()) {}

Broker::~Broker() {
  std::vector<std::unique_ptr<Buffer>> buffers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, buffer] : buffers_) buffers.push_back(std::move(buffer));
    buffers_.clear();
    // Waiting opens are the service's to end before the broker goes; their
    // callbacks must not run into a broker being destroyed.
    waiters_.Clear();
  }
  // Copies that outlive the broker (the daemon ends its engine first; tests
  // may not) free what they hold when they let go, without calling back.
  // Outside mu_: a pin's let-go takes it.
  for (auto& buffer : buffers) buffer->pin->Detach(*buffer->pool, std::move(buffer->allocation));
}

absl::Status Broker::AdmitLocked(SessionId session, const Session& caller,
                                 const CreateParams& params, std::uint64_t bytes,
                                 AfterUnlock* after) {
  const uid_t uid = caller.peer.uid;
  if (absl::Status admitted =
          uid_counts_.Admit(uid, UidCounts::Kind::kBuffers, limits_.max_buffers_per_uid);
      !admitted.ok()) {
    ++rejections_.buffers_per_uid;
    return admitted;
  }
  if (buffers_.size() >= limits_.max_buffers) {
    ++rejections_.buffers;
    return absl::ResourceExhaustedError(
        absl::StrCat("too many buffers: ", buffers_.size(), " exist; the limit is ",
                     limits_.max_buffers, " (max_buffers)"));
  }
  if (const std::uint64_t limit = limits_.max_uid_bytes.For(params.location);
      after != nullptr && limit != 0 && bytes <= limit) {
    const std::uint64_t held = usage_.uid_bytes(uid, params.location);
    if (held > limit - bytes) {
      // All or nothing: when not enough of the uid's own may go, nothing
      // goes, and the quota's refusal below says why.
      (void)MakeRoomLocked(params.location, held - (limit - bytes), *after, uid);
    }
  }
  const Charge charge{uid, session, caller.peer.pid, params.location, bytes};
  return usage_.Admit(charge, params.size, params.name, limits_.max_uid_bytes,
                      limits_.max_session_bytes);
}

absl::Status Broker::MayOpenLocked(const Session& caller, const BufferInfo& buffer,
                                   const OpenParams& params) const {
  if (!MayAccess(caller.peer, buffer, params.access)) {
    return PermissionDenied(caller.peer, buffer,
                            params.access == Access::kReadWrite ? "write" : "read");
  }
  // After the permission: a caller told the owner here may Stat it anyway.
  if (params.expected_owner.has_value() && buffer.owner_uid != *params.expected_owner) {
    return absl::PermissionDeniedError(absl::StrCat(
        "buffer ", Quoted(buffer.name), " is owned by uid ", buffer.owner_uid,
        ", not by the demanded uid ", *params.expected_owner,
        " (a name belongs to whoever creates it first)"));
  }
  return absl::OkStatus();
}

Broker::Buffer* Broker::FindNamedLocked(const std::string& name) {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : buffers_.at(it->second).get();
}

absl::StatusOr<pool::Pool*> Broker::ValidateCreate(
    const CreateParams& params) const {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(params.name));
  if (params.size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", Quoted(params.name), ": size is 0"));
  }
  std::uint64_t max_buffer_bytes;
  {
    absl::MutexLock lock(&mu_);
    max_buffer_bytes = limits_.max_buffer_bytes;
  }
  if (params.size > max_buffer_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer ", Quoted(params.name), ": size ", params.size, " bytes (",
        FormatBytes(params.size), ") exceeds the maximum of ", max_buffer_bytes,
        " bytes (", FormatBytes(max_buffer_bytes), ")"));
  }
  MEMD_RETURN_IF_ERROR(ValidateMode(params.mode));
  if (absl::Status valid = ValidateAttrs(params.attrs); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer ", Quoted(params.name), ": ", valid.message()));
  }
  pool::Pool* pool = pools_.Find(params.location);
  if (pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "location ", params.location.ToString(),
        " is not available on this node (available: ", pools_.LocationNames(),
        ")"));
  }
  return pool;
}

absl::StatusOr<Grant> Broker::Create(SessionId session,
                                     const CreateParams& asked) {
  MEMD_ASSIGN_OR_RETURN(const CreateParams params, ResolvePlacement(asked));
  MEMD_ASSIGN_OR_RETURN(pool::Pool * pool, ValidateCreate(params));
  const std::uint64_t taken = pool->AllocationBytes(params.size);
  // Before anything is allocated: a node the machine lacks is refused.
  MEMD_ASSIGN_OR_RETURN(const pool::Domain domain, CreateDomain(session, params));
  // What the uid's quota takes back of its own goes back to the pool before
  // the allocation (AfterUnlock).
  uid_t asker = 0;
  for (;;) {
    std::shared_ptr<absl::Notification> other_ended;
    MEMD_RETURN_IF_ERROR(WithLock([&](AfterUnlock& after) -> absl::Status {
      MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
      asker = caller->peer.uid;
      if (names_.contains(params.name)) {
        return absl::AlreadyExistsError(
            absl::StrCat("buffer ", Quoted(params.name), " already exists"));
      }
      // Another create of the name allocates now: its outcome decides
      // (ALREADY_EXISTS, or this one creates), not a second allocation.
      if (creating_.Contains(params.name)) {
        MEMD_ASSIGN_OR_RETURN(other_ended, WaitForCreationLocked(session, asker, params.name,
                                                                 0, nullptr));
        return absl::OkStatus();
      }
      // Before allocating; checked again, and charged, once allocated.
      MEMD_RETURN_IF_ERROR(AdmitLocked(session, *caller, params, taken, &after));
      creating_.Begin(params.name);
      return absl::OkStatus();
    }));
    if (other_ended == nullptr) break;
    other_ended->WaitForNotification();
  }
  // Allocation may reach the backend (a system call, page zeroing): never
  // under the registry mutex. The name is in creating_ meanwhile, so that
  // no other create of it allocates too.
  absl::StatusOr<pool::Allocation> allocation =
      AllocateForCreate(*pool, params, domain, asker);
  return WithLock([&](AfterUnlock& after) -> absl::StatusOr<Grant> {
    EndCreationLocked(params.name, after);
    if (!allocation.ok()) return allocation.status();
    return CreateWithAllocationLocked(session, params, pool, std::move(*allocation), after);
  });
}

absl::StatusOr<pool::Allocation> Broker::AllocateForCreate(pool::Pool& pool,
                                                           const CreateParams& params,
                                                           const pool::Domain& domain,
                                                           uid_t asker) {
  absl::StatusOr<pool::Allocation> allocation = pool.Allocate(params.size, domain);
  if (!allocation.ok()) {
    allocation = AllocateUnderPressure(pool, params.size, domain, allocation.status(), asker);
  }
  return allocation;
}

absl::StatusOr<std::shared_ptr<absl::Notification>> Broker::WaitForCreationLocked(
    SessionId session, uid_t uid, const std::string& name, WatchId watch,
    const std::function<void()>& wake) {
  std::shared_ptr<absl::Notification> ended;
  std::function<void()> woken = wake;
  if (!woken) {
    // A call that answers at once waits here, a thread held for as long as
    // the other create's allocation: bounded, and counted (Waiters) as the
    // waiting call it is, so that the session's end wakes it too.
    ended = std::make_shared<absl::Notification>();
    watch = waiters_.NewId();
    woken = [ended] { ended->Notify(); };
  }
  // No name: a seal of the name must not take it (there is no buffer of the
  // name until the create ends, and then EndCreationLocked wakes it).
  MEMD_RETURN_IF_ERROR(waiters_.Add(watch, session, uid, "", std::move(woken), limits_));
  creating_.Wait(name, watch, [&](WatchId id) { return waiters_.Has(id); });
  return ended;
}

void Broker::EndCreationLocked(const std::string& name, AfterUnlock& after) {
  for (WatchId id : creating_.End(name)) {
    // Absent when cancelled or woken by its session's end meanwhile.
    if (Waiters::Wake wake = waiters_.Take(id)) after.wakes.push_back(std::move(wake));
  }
}

absl::StatusOr<Grant> Broker::CreateWithAllocationLocked(
    SessionId session, const CreateParams& params, pool::Pool* pool,
    pool::Allocation allocation, AfterUnlock& after) {
  // Until the buffer owns it, the allocation goes back on every error path.
  auto buffer = std::make_unique<Buffer>();
  buffer->pool = pool;
  buffer->allocation = std::move(allocation);
  auto give_back = [&](absl::Status status) {
    after.freed.emplace_back(pool, std::move(buffer));
    return status;
  };
  auto caller = FindSessionLocked(session);
  if (!caller.ok()) return give_back(caller.status());
  if (names_.contains(params.name)) {
    return give_back(absl::AlreadyExistsError(
        absl::StrCat("buffer ", Quoted(params.name), " already exists")));
  }
  if (absl::Status admitted =
          AdmitLocked(session, **caller, params, buffer->allocation.bytes);
      !admitted.ok()) {
    return give_back(admitted);
  }
  const PeerCredentials& peer = (*caller)->peer;
  BufferInfo& info = buffer->info;
  info.name = params.name;
  // Ids adopted from a previous memd came from another sequence.
  do {
    info.id = buffer_ids_.Next();
  } while (buffers_.contains(info.id));
  info.size = params.size;
  info.location = params.location;
  info.owner_uid = peer.uid;
  info.owner_gid = peer.gid;
  info.mode = params.mode;
  info.state = BufferState::kCreating;
  info.persistence = params.persistence;
  info.created = clock_.Now();
  info.creator_pid = peer.pid;
  info.attrs = params.attrs;
  info.numa_node = buffer->allocation.domain.numa_node;
  info.retention = params.retention;
  info.placement = params.placement;
  buffer->last_used = info.created;
  evicted_.erase(info.name);  // The name means this buffer now.
  buffer->pin = std::make_shared<CopyPin>([this, id = info.id] { CopiesLetGo(id); });
  buffer->replicas = ReplicaSet::Created(params.location, kMaxReplicas).value();
  Buffer& stored = *buffer;
  auto grant = GrantLocked(session, **caller, stored, Access::kReadWrite);
  if (!grant.ok()) return give_back(grant.status());
  stored.charge = Charge{peer.uid, session, peer.pid, params.location,
                         stored.allocation.bytes};
  usage_.Add(stored.charge);
  uid_counts_.Add(peer.uid, UidCounts::Kind::kBuffers);
  names_.emplace(info.name, info.id);
  JournalLocked(stored);
  JournalLeaseLocked(*grant, session);
  buffers_.emplace(info.id, std::move(buffer));
  grant->created = true;
  return grant;
}

absl::StatusOr<Grant> Broker::GrantLocked(SessionId session, Session& holder,
                                          Buffer& buffer, Access access) {
  Grant grant;
  MEMD_RETURN_IF_ERROR(GrantIntoLocked(session, holder, buffer, access, grant));
  return grant;
}

absl::Status Broker::GrantIntoLocked(SessionId session, Session& holder, Buffer& buffer,
                                     Access access, Grant& grant) {
  if (holder.leases.size() >= limits_.max_leases_per_session) {
    ++rejections_.leases_per_session;
    return absl::ResourceExhaustedError(absl::StrCat(
        "session ", session, " holds ", holder.leases.size(),
        " leases; the limit is ", limits_.max_leases_per_session,
        " (max_leases_per_session): release some first"));
  }
  const uid_t uid = holder.peer.uid;
  if (absl::Status admitted =
          uid_counts_.Admit(uid, UidCounts::Kind::kLeases, limits_.max_leases_per_uid);
      !admitted.ok()) {
    ++rejections_.leases_per_uid;
    return admitted;
  }
  MEMD_ASSIGN_OR_RETURN(pool::ExportedHandle handle,
                   buffer.allocation.Export(access));
  LeaseId id;
  do {
    id = lease_ids_.Next();
  } while (leases_.contains(id) || reclaimable_.contains(id));
  const absl::Time now = clock_.Now();
  leases_.emplace(id, Lease{session, buffer.info.id, access, uid, now});
  uid_counts_.Add(uid, UidCounts::Kind::kLeases);
  holder.leases.insert(id);
  buffer.leases.insert(id);
  ++buffer.info.lease_count;
  buffer.last_used = now;
  CountLeaseLocked(buffer, access, /*added=*/true);
  // Taken while the buffer lives, so that its segment, idle or not, never
  // gains a holder once idle (PoolSegment::HeldElsewhere).
  if (handle.replayable()) {
    holder.replayable.try_emplace(buffer.allocation.segment_id,
                                  buffer.allocation.Hold());
  }
  grant.lease = id;
  grant.access = access;
  grant.buffer = buffer.info;
  grant.segment = buffer.allocation.Hold();
  grant.handle = std::move(handle);
  grant.offset = buffer.allocation.offset;
  grant.mapped_bytes = buffer.allocation.bytes;
  grant.segment_id = buffer.allocation.segment_id;
  grant.segment_bytes = buffer.allocation.segment_bytes();
  return absl::OkStatus();
}

absl::StatusOr<Grant> Broker::Open(SessionId session, const OpenParams& params) {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(params.name));
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
  MEMD_ASSIGN_OR_RETURN(std::optional<Grant> grant,
                   OpenLocked(session, *caller, params, 0, nullptr));
  return std::move(*grant);  // Without a wake, OpenLocked never waits.
}

absl::StatusOr<std::optional<Grant>> Broker::OpenOrWatch(
    SessionId session, const OpenParams& params, WatchId watch,
    std::function<void()> wake) {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(params.name));
  // A new copy's memory is allocated outside the mutex; should the buffer
  // change meanwhile (another opener made the copy first), the open looks
  // again, a few times at most.
  constexpr int kTries = 3;
  for (int tried = 1;; ++tried) {
    std::optional<NewCopy> need;
    auto opened = WithLock([&](AfterUnlock& after) -> absl::StatusOr<std::optional<Grant>> {
      MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
      return OpenLocked(session, *caller, params, watch, &wake, &after, &need);
    });
    if (!opened.ok() || !need.has_value()) return opened;
    absl::StatusOr<pool::Allocation> allocation = need->pool->Allocate(need->size, need->domain);
    if (!allocation.ok()) {
      allocation = AllocateUnderPressure(*need->pool, need->size, need->domain,
                                         allocation.status(), need->asker);
    }
    if (!allocation.ok()) return allocation.status();
    absl::Status added = WithLock([&](AfterUnlock& after) -> absl::Status {
      return AddCopyLocked(session, *need, std::move(*allocation), watch, wake, after);
    });
    if (added.ok()) return std::nullopt;  // Waits for the fill it started.
    if (!absl::IsAborted(added) || tried == kTries) return added;
  }
}

absl::StatusOr<std::optional<Grant>> Broker::OpenLocked(
    SessionId session, Session& caller, const OpenParams& params,
    WatchId watch, std::function<void()>* wake, AfterUnlock* after,
    std::optional<NewCopy>* need) {
  const bool may_wait = wake != nullptr && *wake && params.access == Access::kRead &&
                        params.wait_for_seal;
  auto wait = [&]() -> absl::StatusOr<std::optional<Grant>> {
    MEMD_RETURN_IF_ERROR(waiters_.Add(watch, session, caller.peer.uid,
                                      params.name, std::move(*wake), limits_));
    return std::nullopt;
  };
  Buffer* buffer = FindNamedLocked(params.name);
  if (buffer == nullptr) {
    if (may_wait) return wait();
    return NoBufferLocked(caller, params.name);
  }
  MEMD_RETURN_IF_ERROR(MayOpenLocked(caller, buffer->info, params));
  if (params.access == Access::kRead && buffer->info.state != BufferState::kSealed) {
    if (may_wait) return wait();
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", Quoted(params.name),
        " is still being written (not sealed); open it with a wait timeout "
        "to wait for the seal"));
  }
  if (params.access == Access::kReadWrite &&
      buffer->info.state == BufferState::kSealed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer ", Quoted(params.name),
        " is sealed; sealed buffers open read-only"));
  }
  return OpenAtLocked(session, caller, *buffer, params, watch, wake, after, need);
}

absl::StatusOr<std::optional<Grant>> Broker::OpenOrCreate(
    SessionId session, const CreateParams& asked, WatchId watch,
    std::function<void()> wake) {
  MEMD_ASSIGN_OR_RETURN(const CreateParams params, ResolvePlacement(asked, /*may_open=*/true));
  MEMD_ASSIGN_OR_RETURN(pool::Pool * pool, ValidateCreate(params));
  const std::uint64_t taken = pool->AllocationBytes(params.size);
  OpenParams open{params.name, Access::kRead, params.expected_owner};
  open.wait_for_seal = params.wait_for_seal;
  // Open what exists; the lock is dropped only to allocate for a new one.
  // Runs with mu_ held.
  auto open_existing = [&](Session& caller, Buffer& existing)
      -> absl::StatusOr<std::optional<Grant>> {
    // Permission first: a caller that may not read the buffer learns
    // nothing of it, not even whether it guessed its size.
    MEMD_RETURN_IF_ERROR(MayOpenLocked(caller, existing.info, open));
    if (existing.info.size != params.size ||
        (!params.auto_location && !(existing.info.location == params.location))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "buffer ", Quoted(params.name), " exists with size ",
          existing.info.size, " at ", existing.info.location.ToString(),
          "; asked for size ", params.size, " at ",
          params.auto_location ? "auto" : params.location.ToString()));
    }
    return OpenLocked(session, caller, open, watch, &wake);
  };
  MEMD_ASSIGN_OR_RETURN(const pool::Domain domain, CreateDomain(session, params));
  uid_t asker = 0;
  for (;;) {
    std::optional<absl::StatusOr<std::optional<Grant>>> opened;
    std::shared_ptr<absl::Notification> other_ended;
    MEMD_RETURN_IF_ERROR(WithLock([&](AfterUnlock& after) -> absl::Status {
      MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
      asker = caller->peer.uid;
      if (Buffer* existing = FindNamedLocked(params.name)) {
        opened = open_existing(*caller, *existing);
        return absl::OkStatus();
      }
      // Another caller allocates for this name now (N workers loading one
      // model cold): wait for it and look again, rather than allocate a
      // second buffer that may not fit and that nobody would keep.
      if (creating_.Contains(params.name)) {
        MEMD_ASSIGN_OR_RETURN(other_ended, WaitForCreationLocked(session, asker, params.name,
                                                                 watch, wake));
        if (other_ended == nullptr) opened.emplace(std::optional<Grant>());  // `wake` will come.
        return absl::OkStatus();
      }
      // As Create: the uid's own evictable data may give way to its quota.
      MEMD_RETURN_IF_ERROR(AdmitLocked(session, *caller, params, taken, &after));
      creating_.Begin(params.name);
      return absl::OkStatus();
    }));
    if (opened.has_value()) return *std::move(opened);
    if (other_ended == nullptr) break;
    other_ended->WaitForNotification();
  }
  // The name is in creating_ until the buffer is named or the allocation
  // failed, in one step with either (EndCreationLocked).
  absl::StatusOr<pool::Allocation> allocation =
      AllocateForCreate(*pool, params, domain, asker);
  auto created = WithLock([&](AfterUnlock& after) -> absl::StatusOr<Grant> {
    EndCreationLocked(params.name, after);
    if (!allocation.ok()) return allocation.status();
    return CreateWithAllocationLocked(session, params, pool, std::move(*allocation), after);
  });
  if (created.ok() || !absl::IsAlreadyExists(created.status())) {
    if (!created.ok()) return created.status();
    return std::optional<Grant>(std::move(*created));
  }
  // The name was created meanwhile other than through Create or
  // OpenOrCreate (creating_ keeps those out): open what is there.
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
  Buffer* existing = FindNamedLocked(params.name);
  if (existing == nullptr) {
    // A lost race, not an unreachable daemon: ABORTED says "retry the call".
    return absl::AbortedError(absl::StrCat(
        "buffer ", Quoted(params.name),
        " was created and removed concurrently; try again"));
  }
  return open_existing(*caller, *existing);
}

absl::Status Broker::AddTransferWait(SessionId session, WatchId watch) {
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
  // No name: only the session's end or CancelWatch takes it. Its wake is
  // nothing: the engine ends the call when the session's transfers end.
  return waiters_.Add(watch, session, caller->peer.uid, "", [] {}, limits_);
}

WatchId Broker::NewWatchId() {
  absl::MutexLock lock(&mu_);
  return waiters_.NewId();
}

bool Broker::CancelWatch(WatchId id) {
  absl::MutexLock lock(&mu_);
  failed_fills_.erase(id);
  ForgetMemoryWaitLocked(id);
  return waiters_.Cancel(id);
}

absl::StatusOr<BufferInfo> Broker::Seal(SessionId session, LeaseId lease_id) {
  return WithLock([&](AfterUnlock& after) -> absl::StatusOr<BufferInfo> {
    MEMD_ASSIGN_OR_RETURN(Lease * lease, FindLeaseLocked(session, lease_id));
    Buffer& record = *buffers_.at(lease->buffer);
    // The buffer is its home's record; an orphaned copy is unlinked.
    Buffer* home = HomeOfLocked(record);
    Buffer& buffer = home != nullptr ? *home : record;
    if (lease->access != Access::kReadWrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease ", lease_id, " on buffer ", Quoted(buffer.info.name),
          " is read-only; only a read-write lease can seal"));
    }
    if (buffer.info.unlinked) {
      return absl::FailedPreconditionError(absl::StrCat(
          "buffer ", Quoted(buffer.info.name),
          " was unlinked; there is nothing left to seal"));
    }
    if (buffer.info.state == BufferState::kSealed) {
      return absl::FailedPreconditionError(
          absl::StrCat("buffer ", Quoted(buffer.info.name), " is sealed already"));
    }
    // A claim is taken under mu_ before its copy is queued, so none can
    // start writing after this check. Clients' copies write only copies
    // they hold writable leases on; fills of other copies make no bytes
    // anyone reads change.
    if (const int writers = ClientWritersLocked(buffer); writers > 0) {
      absl::Status refusal = absl::FailedPreconditionError(absl::StrCat(
          "buffer ", Quoted(buffer.info.name), " cannot be sealed: ", writers,
          writers == 1 ? " copy" : " copies",
          " may still write it; wait for them to end (or cancel them), then seal"));
      refusal.SetPayload(kCopiesStillWrite, absl::Cord(absl::StrCat(buffer.info.id)));
      return refusal;
    }
    buffer.info.state = BufferState::kSealed;
    buffer.info.sealed = clock_.Now();
    for (auto& [at, id] : buffer.copies) {
      BufferInfo& copy = buffers_.at(id)->info;
      copy.state = buffer.info.state;
      copy.sealed = buffer.info.sealed;
    }
    // What a writer sealed through one copy is the others' next generation.
    if (buffer.replicas.has_value() && buffer.replicas->size() > 1) {
      MEMD_RETURN_IF_ERROR(buffer.replicas->Written(record.info.location));
      RefreshStaleLocked(buffer, session, lease->uid, after);
    }
    JournalLocked(buffer);
    after.Wake(waiters_.TakeName(buffer.info.name));
    // What the lease maps, sealed: the sealer's Buffer keeps its own
    // location (a copy's, when it sealed through one).
    return record.info;
  });
}

absl::StatusOr<BufferInfo> Broker::Stat(SessionId session,
                                        const std::string& name) {
  MEMD_RETURN_IF_ERROR(ValidateBufferName(name));
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
  Buffer* buffer = FindNamedLocked(name);
  if (buffer == nullptr) return NoBufferLocked(*caller, name);
  if (!MayAccess(caller->peer, buffer->info, Access::kRead)) {
    return PermissionDenied(caller->peer, buffer->info, "inspect");
  }
  BufferInfo view = ViewLocked(*buffer);
  view.holders = HoldersLocked(*caller, *buffer);
  return view;
}

void Broker::SetLimits(const BrokerLimits& limits) {
  absl::MutexLock lock(&mu_);
  limits_ = limits;
}

void Broker::SetJournal(BufferJournal* journal) {
  absl::MutexLock lock(&mu_);
  journal_ = journal;
}

void Broker::SetFreedWhileWritten(std::function<void(BufferId)> hook) {
  absl::MutexLock lock(&mu_);
  on_freed_while_written_ = std::move(hook);
}

void Broker::SetFreedNotice(
    std::function<void(SessionId, const std::vector<BufferId>&)> hook) {
  absl::MutexLock lock(&mu_);
  on_freed_notice_ = std::move(hook);
}

}  // namespace memd::broker
