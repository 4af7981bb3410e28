#include "daemon/transfer/engine_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"

namespace memd::transfer {
namespace {

// How long a lane sleeps at most: the net under lost wakes, shorter while
// it has transfers.
constexpr absl::Duration kBusyNap = absl::Milliseconds(5);
constexpr absl::Duration kIdleNap = absl::Milliseconds(100);

// How a cancelled transfer's status says why, by RequestCancel's reason.
const char* CancelledBecause(FailureReason reason) {
  switch (reason) {
    case FailureReason::kSessionEnded:
      return " ended with its session";
    case FailureReason::kDestinationFreed:
      return " was cancelled: its destination buffer was freed, and nobody could read it";
    default:
      return " was cancelled";
  }
}

}  // namespace

EngineCore::EngineCore(const EngineOptions& options, std::vector<backend::CopyDevice*> devices,
                       const Clock& clock)
    : options_(options),
      devices_(std::move(devices)),
      clock_(clock),
      admission_(AdmissionLimits{.max_session_bytes = options.max_session_bytes,
                                 .max_uid_bytes = options.max_uid_bytes,
                                 .max_total_bytes = options.max_total_bytes,
                                 .max_session_transfers = options.max_session_transfers,
                                 .max_uid_transfers = options.max_uid_transfers}),
      backoff_(options.retry_backoff) {
  absl::MutexLock lock(&mu_);
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    counters_.push_back(std::make_unique<DeviceCounters>());
  }
  schedulers_.assign(devices_.size() + 1, Scheduler(options.ageing, options.max_critical_run));
  max_session_watches_ = options.max_session_watches;
  unhealthy_.assign(devices_.size(), absl::OkStatus());
  for (int p = 0; p < kPriorities; ++p) priority_stats_[p].priority = static_cast<Priority>(p);
}

std::string EngineCore::Describe(const TransferRecord& record) const {
  std::string text = absl::StrCat("transfer ", record.id, " (",
                                  std::string(DirectionName(record.direction)), " of ",
                                  FormatBytes(record.total()));
  if (record.device_index >= 0) {
    absl::StrAppend(&text, " on device ", devices_[record.device_index]->ordinal());
  }
  if (record.peer_index >= 0 && record.peer_index != record.device_index) {
    absl::StrAppend(&text, " to device ", devices_[record.peer_index]->ordinal());
  }
  return absl::StrCat(text, ")");
}

absl::Status EngineCore::NotFound(SessionId session, TransferId id) {
  return absl::NotFoundError(absl::StrCat("session ", session, " has no transfer ", id));
}

RecordPtr EngineCore::Find(SessionId session, TransferId id) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return nullptr;
  auto found = it->second.transfers.find(id);
  return found == it->second.transfers.end() ? nullptr : found->second;
}

absl::Status EngineCore::DeviceHealth(int index) const {
  {
    absl::MutexLock lock(&mu_);
    if (!unhealthy_[index].ok()) return unhealthy_[index];
  }
  return devices_[index]->health();
}

absl::Status EngineCore::Unhealthy(int index, const absl::Status& sticky) const {
  return absl::FailedPreconditionError(
      absl::StrCat("device ", devices_[index]->ordinal(),
                   " is unhealthy and takes no copies until the daemon restarts: ",
                   sticky.message()));
}

absl::StatusOr<TransferId> EngineCore::Submit(RecordPtr record) {
  // A copy on or to a broken device is refused, the one place that checks.
  // What the devices say now is read first (health() is a driver call,
  // never made under the mutex); what their lanes recorded is read under
  // it, so that no copy joins a lane after it failed its device's copies.
  const int uses[] = {record->device_index, record->peer_index};
  absl::Status reported[2];
  for (int i = 0; i < 2; ++i) {
    if (uses[i] >= 0) reported[i] = devices_[uses[i]]->health();
  }
  const absl::Time now = clock_.Now();
  CoreLock lock(*this);
  for (int i = 0; i < 2; ++i) {
    if (uses[i] < 0) continue;
    const absl::Status& sticky = unhealthy_[uses[i]].ok() ? reported[i] : unhealthy_[uses[i]];
    if (!sticky.ok()) return Unhealthy(uses[i], sticky);
  }
  MEMD_RETURN_IF_ERROR(admission_.Admit(record->session, record->uid, record->total()));
  record->id = ids_.Next();
  TransferProgress& progress = record->progress;
  progress.id = record->id;
  progress.bytes_total = record->total();
  progress.direction = record->direction;
  progress.device =
      record->device_index >= 0 ? devices_[record->device_index]->ordinal() : -1;
  progress.priority = record->priority;
  progress.submitted = now;
  progress.started = absl::InfinitePast();
  progress.finished = absl::InfinitePast();
  record->waiting_since = now;
  record->last_progress = now;
  sessions_[record->session].transfers[record->id] = record;
  range_order_.Admit(record);
  schedulers_[record->lane].Add(record);
  if (record->priority == Priority::kCritical) {
    critical_submits_.fetch_add(1, std::memory_order_release);
  }
  deferred_wakes_.push_back(record->lane);
  return record->id;
}

absl::StatusOr<TransferProgress> EngineCore::Progress(SessionId session, TransferId id) const {
  absl::MutexLock lock(&mu_);
  RecordPtr record = Find(session, id);
  if (record == nullptr) return NotFound(session, id);
  return record->progress;
}

absl::StatusOr<std::uint64_t> EngineCore::Watch(SessionId session, TransferId id,
                                                TransferDone done) {
  TransferProgress ended;
  std::uint64_t token = 0;
  {
    CoreLock lock(*this);
    RecordPtr record = Find(session, id);
    if (record == nullptr) return NotFound(session, id);
    if (!record->terminal()) {
      if (watches_.of_session(session) >= max_session_watches_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "session ", session, " waits for ", watches_.of_session(session),
            " transfers already, the limit (max_waits_per_session); wait for one to end"));
      }
      return watches_.Add(session, id, std::move(done));
    }
    ended = record->progress;
    token = watches_.NewToken();
  }
  done(ended);
  return token;
}

bool EngineCore::CancelWatch(std::uint64_t token) {
  absl::MutexLock lock(&mu_);
  if (watches_.Remove(token)) return true;
  auto running = firing_.find(token);
  // A callback cancelling its own watch must not wait for itself.
  if (running != firing_.end() && running->second != std::this_thread::get_id()) {
    while (firing_.contains(token)) changed_.Wait(&mu_);
  }
  return false;
}

void EngineCore::RequestCancel(TransferRecord& record, FailureReason reason) {
  if (record.terminal() || record.cancel_requested) return;
  record.cancel_requested = true;
  record.cancel_reason = reason;
  deferred_wakes_.push_back(record.lane);
}

absl::StatusOr<TransferProgress> EngineCore::Cancel(SessionId session, TransferId id) {
  CoreLock lock(*this);
  RecordPtr record = Find(session, id);
  if (record == nullptr) return NotFound(session, id);
  RequestCancel(*record, FailureReason::kCancelled);
  return record->progress;
}

bool EngineCore::SessionDrained(SessionId session) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return true;
  for (const auto& [id, record] : it->second.transfers) {
    if (!record->terminal() || record->in_flight > 0) return false;
  }
  // And the watches of what ended have run (any session's: they are short;
  // never this thread's own, which would wait for itself), and what drained
  // transfers held is let go: a buffer freed under a copy goes back to its
  // pool before the session's leases do, not some time after.
  for (const auto& [token, thread] : firing_) {
    if (thread != std::this_thread::get_id()) return false;
  }
  return letting_go_ == 0;
}

void EngineCore::EndSession(SessionId session, absl::Duration drain) {
  const absl::Time give_up = clock_.Now() + drain;
  {
    CoreLock lock(*this);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return;
    for (auto& [id, record] : it->second.transfers) {
      RequestCancel(*record, FailureReason::kSessionEnded);
    }
  }  // Wakes the lanes.
  CoreLock lock(*this);
  while (!SessionDrained(session)) {
    if (clock_.WaitWithDeadline(&mu_, &changed_, give_up)) break;
  }
  // What still runs ends later, unseen; its holds keep the memory alive.
  sessions_.erase(session);
}

void EngineCore::CancelAll(FailureReason reason) {
  CoreLock lock(*this);
  for (Scheduler& scheduler : schedulers_) {
    for (const RecordPtr& record : scheduler.records()) RequestCancel(*record, reason);
  }
}

void EngineCore::CancelWritesTo(std::uint64_t buffer_id) {
  if (buffer_id == 0) return;
  CoreLock lock(*this);
  for (Scheduler& scheduler : schedulers_) {
    for (const RecordPtr& record : scheduler.records()) {
      if (record->destination.buffer_id == buffer_id) {
        RequestCancel(*record, FailureReason::kDestinationFreed);
      }
    }
  }
}

std::vector<TransferId> EngineCore::WritersOf(SessionId session,
                                              std::uint64_t buffer_id) const {
  std::vector<TransferId> writers;
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || buffer_id == 0) return writers;
  for (const auto& [id, record] : it->second.transfers) {
    if (record->destination.buffer_id == buffer_id && !record->let_go) writers.push_back(id);
  }
  std::sort(writers.begin(), writers.end());
  return writers;
}

std::optional<Chunk> EngineCore::TakeChunk(
    LaneIndex lane, absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits) {
  std::optional<Chunk> chunk = schedulers_[lane].Next(now, fits);
  if (chunk) Started(*chunk->record, now);
  return chunk;
}

std::optional<Chunk> EngineCore::TakeCriticalChunk(
    LaneIndex lane, absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits) {
  std::optional<Chunk> chunk = schedulers_[lane].NextCritical(now, fits);
  if (chunk) Started(*chunk->record, now);
  return chunk;
}

void EngineCore::Started(TransferRecord& record, absl::Time now) {
  if (record.progress.state == TransferState::kQueued) {
    record.progress.state = TransferState::kRunning;
    // The clock now, not the lane's turn: a transfer that waited for another
    // starts after that one's finish time.
    record.progress.started = clock_.Now();
    record.progress.path = record.path;
    ++paths_[record.path];
    PriorityStats& stats = priority_stats_[static_cast<int>(record.priority)];
    ++stats.started;
    stats.wait_seconds +=
        absl::ToDoubleSeconds(record.progress.started - record.progress.submitted);
  }
  if (record.in_flight == 1) record.last_progress = now;  // It was idle: the stall clock starts.
}

void EngineCore::ChunkDone(const Chunk& chunk, absl::Time now) {
  TransferRecord& record = *chunk.record;
  --record.in_flight;
  changed_.SignalAll();
  if (record.terminal()) {  // Ended while the chunk ran: only drained.
    LetGoOnceDrained(record);
    return;
  }
  record.progress.bytes_done += chunk.bytes;
  record.last_progress = now;
  FlowStats& flow = flows_[{record.direction, record.progress.device}];
  flow.direction = record.direction;
  flow.device = record.progress.device;
  flow.bytes += chunk.bytes;
  if (record.cancel_requested) {
    deferred_wakes_.push_back(record.lane);  // The sweep ends it once drained.
    return;
  }
  if (record.progress.bytes_done == record.total()) {
    ++flow.transfers;
    Finish(record, TransferState::kDone, absl::OkStatus(), std::nullopt);
  }
}

void EngineCore::ChunkFailed(const Chunk& chunk, const absl::Status& error, absl::Time now) {
  TransferRecord& record = *chunk.record;
  --record.in_flight;
  changed_.SignalAll();
  LetGoOnceDrained(record);
  if (record.terminal() || record.cancel_requested) return;
  if (absl::IsUnavailable(error) && chunk.attempt < options_.max_retries) {
    const absl::Duration backoff = backoff_.After(chunk.attempt);
    if (now + backoff < record.deadline) {
      record.redo.push_back(ChunkRedo{chunk.offset, chunk.bytes, chunk.attempt + 1, now + backoff});
      ++record.progress.retries;
      ++retries_;
      deferred_wakes_.push_back(record.lane);
      return;
    }
  }
  std::string retried;
  if (chunk.attempt > 0) retried = absl::StrCat(" after ", chunk.attempt, " retries");
  Finish(record, TransferState::kFailed,
         absl::Status(error.code(),
                      absl::StrCat(Describe(record), ": chunk ", record.chunk_index(chunk.offset),
                                   " at byte offset ", chunk.offset, " (", chunk.bytes,
                                   " bytes) failed", retried, ": ", error.message())),
         FailureReason::kDriver);
}

void EngineCore::FailDevice(int index, const absl::Status& sticky) {
  if (unhealthy_[index].ok()) unhealthy_[index] = sticky;
  const absl::Status status = Unhealthy(index, sticky);
  for (Scheduler& scheduler : schedulers_) {
    for (const RecordPtr& record : scheduler.records()) {
      if (record->terminal()) continue;
      if (record->device_index != index && record->peer_index != index) continue;
      Finish(*record, TransferState::kFailed,
             absl::Status(status.code(), absl::StrCat(Describe(*record), " failed: ",
                                                      status.message())),
             FailureReason::kDeviceUnhealthy);
    }
  }
}

void EngineCore::Sweep(LaneIndex lane, absl::Time now) {
  for (const RecordPtr& pointer : schedulers_[lane].records()) {
    TransferRecord& record = *pointer;
    if (record.terminal()) continue;
    // Formatted only for a transfer that ends here: this runs every lane
    // turn for every transfer.
    const auto moved = [&record] {
      return absl::StrCat(FormatBytes(record.progress.bytes_done), " of ",
                          FormatBytes(record.total()), " moved");
    };
    if (record.cancel_requested && record.in_flight == 0) {
      Finish(record, TransferState::kCancelled,
             absl::CancelledError(
                 absl::StrCat(Describe(record), CancelledBecause(record.cancel_reason), " (",
                              moved(), ")")),
             record.cancel_reason);
    } else if (now >= record.deadline) {
      Finish(record, TransferState::kFailed,
             absl::DeadlineExceededError(
                 absl::StrCat(Describe(record), " passed its deadline (", moved(), ")")),
             FailureReason::kDeadline);
    } else if (record.in_flight > 0 && now - record.last_progress >= options_.stall_timeout) {
      // Its chunks never came back: end it anyway; they keep their holds.
      const std::string why = absl::StrCat(
          Describe(record), " stalled: no chunk finished for ",
          absl::FormatDuration(options_.stall_timeout), " (", moved(), "; ", record.in_flight,
          " chunks still on the device)");
      if (record.cancel_requested) {
        Finish(record, TransferState::kCancelled, absl::CancelledError(why),
               record.cancel_reason);
      } else {
        Finish(record, TransferState::kFailed, absl::DeadlineExceededError(why),
               FailureReason::kStall);
      }
    }
  }
  schedulers_[lane].DropTerminal();
}

absl::Time EngineCore::NextWake(LaneIndex lane, absl::Time now) const {
  const Scheduler& scheduler = schedulers_[lane];
  absl::Time wake = now + (scheduler.records().empty() ? kIdleNap : kBusyNap);
  for (const RecordPtr& record : scheduler.records()) {
    if (record->terminal()) continue;
    wake = std::min(wake, record->deadline);
    if (record->in_flight > 0) {
      wake = std::min(wake, record->last_progress + options_.stall_timeout);
    }
  }
  return std::min(wake, scheduler.NextRetry());
}

bool EngineCore::LaneIdle(LaneIndex lane) const {
  const auto& records = schedulers_[lane].records();
  return std::all_of(records.begin(), records.end(),
                     [](const RecordPtr& record) { return record->terminal(); });
}

void EngineCore::Finish(TransferRecord& record, TransferState state, absl::Status status,
                        std::optional<FailureReason> reason) {
  if (record.terminal()) return;
  record.progress.state = state;
  record.progress.status = std::move(status);
  record.progress.finished = clock_.Now();
  if (reason.has_value()) ++failures_[*reason];
  admission_.Release(record.session, record.uid, record.total());
  LetGoOnceDrained(record);
  for (WatchList::Entry& entry : watches_.Take(record.id)) {
    firing_[entry.token] = std::this_thread::get_id();
    deferred_watches_.push_back(Firing{entry.token, std::move(entry.done), record.progress});
  }
  Forget(record);
  changed_.SignalAll();
}

// A transfer that ended with chunks still on a device (deadline, stall, a
// failed sibling chunk) may still write its destination: transfers ordered
// behind it start, and its memory may go, only when those chunks drained.
void EngineCore::LetGoOnceDrained(TransferRecord& record) {
  if (!record.terminal() || record.in_flight > 0 || record.let_go) return;
  record.let_go = true;
  for (const RecordPtr& runnable : range_order_.Release(record)) {
    deferred_wakes_.push_back(runnable->lane);
  }
  // Nothing of it is left on a device: its memory need not stay, though the
  // record stays to be asked about (kept_finished_per_session).
  if (record.destination.written) record.destination.written();
  for (Endpoint* end : {&record.source, &record.destination}) {
    deferred_let_go_.push_back(
        LetGo{std::move(end->hold), std::move(end->pin), std::move(end->written)});
  }
}

void EngineCore::Forget(TransferRecord& record) {
  auto it = sessions_.find(record.session);
  if (it == sessions_.end()) return;
  SessionRecords& session = it->second;
  session.finished.push_back(record.id);
  while (session.finished.size() >
         static_cast<std::size_t>(std::max(options_.kept_finished_per_session, 0))) {
    session.transfers.erase(session.finished.front());
    session.finished.pop_front();
  }
}

void EngineCore::UnlockAndRunDeferred() {
  std::vector<Firing> firing;
  firing.swap(deferred_watches_);
  std::vector<LaneIndex> wakes;
  wakes.swap(deferred_wakes_);
  std::vector<LetGo> let_go;
  let_go.swap(deferred_let_go_);
  const bool letting_go = !let_go.empty();
  if (letting_go) ++letting_go_;
  mu_.Unlock();
  let_go.clear();
  for (LaneIndex lane : wakes) {
    if (lane < static_cast<LaneIndex>(lanes_.size())) lanes_[lane]->Wake();
  }
  if (firing.empty() && !letting_go) return;
  for (Firing& watch : firing) watch.done(watch.progress);
  absl::MutexLock lock(&mu_);
  for (const Firing& watch : firing) firing_.erase(watch.token);
  if (letting_go) --letting_go_;
  changed_.SignalAll();
}

void EngineCore::SetMaxSessionWatches(int most) {
  absl::MutexLock lock(&mu_);
  max_session_watches_ = most;
}

TransferActivity EngineCore::UidActivity(uid_t uid) const {
  absl::MutexLock lock(&mu_);
  return admission_.uid_activity(uid);
}

TransferListing EngineCore::List(std::optional<uid_t> only, std::size_t most) const {
  // Under the mutex only what changes (the progress) and a reference to
  // what does not: the endpoints' names, locations and offsets are fixed at
  // Submit (letting go moves only their hold, pin and callback).
  std::vector<std::pair<RecordPtr, TransferProgress>> unfinished;
  absl::Time now;
  {
    absl::MutexLock lock(&mu_);
    now = clock_.Now();
    for (const Scheduler& scheduler : schedulers_) {
      for (const RecordPtr& record : scheduler.records()) {
        if (record->terminal() || (only.has_value() && record->uid != *only)) continue;
        unfinished.emplace_back(record, record->progress);
      }
    }
  }
  const auto older = [](const auto& a, const auto& b) {
    return std::pair(a.second.submitted, a.second.id) < std::pair(b.second.submitted, b.second.id);
  };
  TransferListing listing;
  listing.now = now;
  if (unfinished.size() > most) {
    listing.omitted = unfinished.size() - most;
    std::nth_element(unfinished.begin(), unfinished.begin() + static_cast<std::ptrdiff_t>(most),
                     unfinished.end(), older);
    unfinished.resize(most);
  }
  std::sort(unfinished.begin(), unfinished.end(), older);
  for (auto& [record, progress] : unfinished) {
    ListedTransfer& listed = listing.transfers.emplace_back();
    listed.progress = std::move(progress);
    listed.session = record->session;
    listed.uid = record->uid;
    listed.source_name = record->source.name;
    listed.source_location = record->source.location;
    listed.source_offset = record->source.offset;
    listed.destination_name = record->destination.name;
    listed.destination_location = record->destination.location;
    listed.destination_offset = record->destination.offset;
    listed.age = now - listed.progress.submitted;
  }
  return listing;
}

EngineStats EngineCore::Stats() const {
  EngineStats stats;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, flow] : flows_) stats.flows.push_back(flow);
    stats.priorities.assign(std::begin(priority_stats_), std::end(priority_stats_));
    for (const Scheduler& scheduler : schedulers_) {
      for (const RecordPtr& record : scheduler.records()) {
        if (record->progress.state == TransferState::kQueued) {
          ++stats.priorities[static_cast<int>(record->priority)].queued;
        }
      }
    }
    stats.paths = paths_;
    stats.failures = failures_;
    stats.retries = retries_;
    stats.active_transfers = admission_.total_transfers();
    stats.active_bytes = admission_.total_bytes();
    stats.admission_rejections = admission_.rejections();
    stats.admission_rejections_by_limit = admission_.rejections_by_limit();
  }
  for (int i = 0; i < device_count(); ++i) {
    DeviceStats device;
    device.device = devices_[i]->ordinal();
    device.health = DeviceHealth(i);
    device.slots = counters_[i]->slots.load();
    device.slots_in_use = counters_[i]->slots_in_use.load();
    device.staging_seconds = counters_[i]->staging_ns.load() / 1e9;
    device.dma_seconds = counters_[i]->dma_ns.load() / 1e9;
    stats.devices.push_back(device);
  }
  return stats;
}

}  // namespace memd::transfer
