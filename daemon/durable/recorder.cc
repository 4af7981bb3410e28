#include "daemon/durable/recorder.h"

#include <utility>

#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace memd::durable {

BufferEntry EntryOf(const broker::BufferInfo& info, const pool::Allocation& allocation) {
  BufferEntry entry;
  entry.id = info.id;
  entry.name = info.name;
  entry.size = info.size;
  entry.location = info.location.ToString();
  entry.owner_uid = info.owner_uid;
  entry.owner_gid = info.owner_gid;
  entry.mode = info.mode;
  entry.sealed = info.state == broker::BufferState::kSealed;
  entry.ephemeral = info.persistence == broker::Persistence::kEphemeral;
  entry.unlinked = info.unlinked;
  entry.created_unix_ns = absl::ToUnixNanos(info.created);
  entry.sealed_unix_ns = info.sealed.has_value() ? absl::ToUnixNanos(*info.sealed) : 0;
  entry.creator_pid = info.creator_pid;
  entry.attrs = info.attrs;
  entry.segment_id = allocation.segment_id;
  entry.offset = allocation.offset;
  entry.allocation_bytes = allocation.bytes;
  if (info.retention != broker::Retention::kPinned) {
    entry.retention = std::string(broker::RetentionName(info.retention));
  }
  entry.numa_node = info.numa_node;
  return entry;
}

Recorder::Recorder(FdStore& store, std::function<std::string(const Location&)> device_uuid,
                   std::uint64_t max_segments_per_uid)
    : store_(store),
      device_uuid_(std::move(device_uuid)),
      max_segments_per_uid_(max_segments_per_uid) {}

Recorder::~Recorder() = default;

absl::Status Recorder::Begin(const DurableState& state, std::uint64_t epoch,
                             std::vector<std::string> superseded) {
  StateJournalOptions options;
  options.superseded = std::move(superseded);
  auto journal = StateJournal::Create(
      state, epoch,
      StateStoreHooks{
          [this](const std::string& name, int fd) { return store_.Store(name, fd); },
          [this](const std::string& name) { return store_.Remove(name); }},
      std::move(options));
  if (!journal.ok()) return journal.status();
  absl::MutexLock lock(&mu_);
  journal_ = std::move(*journal);
  in_state_ = InState();
  for (const auto& [id, segment] : state.segments) {
    in_state_.segments.emplace(id, segment.uid);
    ++in_state_.segments_per_uid[segment.uid];
  }
  for (const auto& [id, buffer] : state.buffers) in_state_.buffers.insert(id);
  for (const auto& [id, session] : state.sessions) in_state_.sessions.insert(id);
  for (const auto& [id, lease] : state.leases) in_state_.leases.insert(id);
  return absl::OkStatus();
}

void Recorder::Detach() {
  absl::MutexLock lock(&mu_);
  journal_.reset();
}

SegmentEntry Recorder::EntryOf(const pool::SegmentRecord& segment) const {
  SegmentEntry entry;
  entry.id = segment.id;
  entry.location = segment.location.ToString();
  entry.device_uuid = device_uuid_(segment.location);
  entry.bytes = segment.bytes;
  entry.small = segment.small;
  entry.uid = segment.domain.uid;
  entry.gid = segment.domain.gid;
  entry.mode = segment.domain.mode;
  return entry;
}

void Recorder::SegmentAdded(const pool::SegmentRecord& segment, int durable_fd) {
  // Memory that cannot outlive memd (legacy IPC, Level Zero) stays out of
  // the state, and so do the buffers in it.
  if (durable_fd < 0) return;
  const std::uint32_t uid = segment.domain.uid;
  {
    // The slot is taken before the store, so that two segments of one uid
    // at once cannot both pass its limit.
    absl::MutexLock lock(&mu_);
    if (journal_ == nullptr || !TakeSlotLocked(uid)) return;
  }
  if (absl::Status stored = store_.Store(SegmentFdName(segment.id), durable_fd); !stored.ok()) {
    {
      absl::MutexLock lock(&mu_);
      --in_state_.segments_per_uid[uid];
    }
    Failed(stored, "storing a segment's descriptor");
    return;
  }
  Record(EntryOf(segment), [id = segment.id, uid](InState& in_state) {
    in_state.segments.emplace(id, uid);
    return true;
  });
}

bool Recorder::TakeSlotLocked(std::uint32_t uid) {
  std::uint64_t& taken = in_state_.segments_per_uid[uid];
  if (max_segments_per_uid_ == 0 || taken < max_segments_per_uid_) {
    ++taken;
    return true;
  }
  // The first time, then at each power of two: a flood of them is one line
  // per doubling.
  const std::uint64_t count = ++segments_not_kept_;
  if ((count & (count - 1)) == 0) {
    spdlog::warn(
        "durability: uid {} has {} segments kept (durable_segments_per_uid): its new ones "
        "will not outlive memd ({} segments not kept so far)",
        uid, taken, count);
  }
  return false;
}

void Recorder::SegmentChanged(const pool::SegmentRecord& segment) {
  // A segment scrubbed for another domain may change uid: it moves to the
  // new uid's slots, or out of the state when that uid has none left.
  bool no_slot = false;
  Record(EntryOf(segment), [this, id = segment.id, uid = segment.domain.uid,
                            &no_slot](InState& in_state) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = in_state.segments.find(id);
    if (it == in_state.segments.end()) return false;
    if (it->second == uid) return true;
    if (!TakeSlotLocked(uid)) {
      no_slot = true;  // It leaves the state below, and its old slot with it.
      return false;
    }
    --in_state.segments_per_uid[it->second];
    it->second = uid;
    return true;
  });
  if (no_slot) SegmentRemoved(segment.id);
}

void Recorder::SegmentRemoved(std::uint64_t id) {
  bool was_recorded = false;
  Record(DropSegment{id}, [id, &was_recorded](InState& in_state) {
    auto it = in_state.segments.find(id);
    was_recorded = it != in_state.segments.end();
    if (was_recorded) {
      --in_state.segments_per_uid[it->second];
      in_state.segments.erase(it);
    }
    return was_recorded;
  });
  if (!was_recorded) return;
  if (absl::Status removed = store_.Remove(SegmentFdName(id)); !removed.ok()) {
    Failed(removed, "dropping a segment's descriptor");
  }
}

void Recorder::BufferChanged(const broker::BufferInfo& info,
                             const pool::Allocation& allocation) {
  Record(durable::EntryOf(info, allocation),
         [segment = allocation.segment_id, id = info.id](InState& in_state) {
           if (!in_state.segments.contains(segment)) return false;
           in_state.buffers.insert(id);
           return true;
         });
}

void Recorder::BufferFreed(broker::BufferId id) {
  Record(DropBuffer{id}, [id](InState& in_state) { return in_state.buffers.erase(id) > 0; });
}

void Recorder::SessionStarted(broker::SessionId id, uid_t uid, const std::string& token_digest) {
  // A session without a digest could never re-claim: nothing to keep.
  if (token_digest.size() != kTokenDigestBytes) return;
  Record(SessionEntry{id, static_cast<std::uint32_t>(uid), token_digest},
         [id](InState& in_state) {
           in_state.sessions.insert(id);
           return true;
         });
}

void Recorder::SessionEnded(broker::SessionId id) {
  Record(DropSession{id}, [id](InState& in_state) { return in_state.sessions.erase(id) > 0; });
}

void Recorder::LeaseGranted(broker::LeaseId id, broker::SessionId session,
                            broker::BufferId buffer, broker::Access access) {
  Record(LeaseEntry{id, session, buffer, access == broker::Access::kReadWrite},
         [id, session, buffer](InState& in_state) {
           if (!in_state.sessions.contains(session) || !in_state.buffers.contains(buffer)) {
             return false;
           }
           in_state.leases.insert(id);
           return true;
         });
}

void Recorder::LeaseEnded(broker::LeaseId id) {
  Record(DropLease{id}, [id](InState& in_state) { return in_state.leases.erase(id) > 0; });
}

bool Recorder::recording() {
  absl::MutexLock lock(&mu_);
  return journal_ != nullptr;
}

void Recorder::Record(const Change& change, absl::FunctionRef<bool(InState&)> keep) {
  absl::Status recorded;
  {
    absl::MutexLock lock(&mu_);
    if (journal_ == nullptr) return;
    if (!keep(in_state_)) return;
    recorded = journal_->Record({&change, 1});
  }
  if (!recorded.ok()) Failed(recorded, "journaling a change");
}

void Recorder::Failed(const absl::Status& status, const char* what) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  spdlog::error("durability: {} failed: {}; buffers changed since may not survive a restart",
                what, status.ToString());
}

}  // namespace memd::durable
