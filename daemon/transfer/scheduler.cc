#include "daemon/transfer/scheduler.h"

#include <algorithm>
#include <tuple>

namespace memd::transfer {

void Scheduler::Add(RecordPtr record) {
  ++uids_[record->uid].records;
  records_.push_back(std::move(record));
}

void Scheduler::DropTerminal() {
  std::erase_if(records_, [this](const RecordPtr& record) {
    if (!record->terminal()) return false;
    auto it = uids_.find(record->uid);
    if (it != uids_.end() && --it->second.records == 0) uids_.erase(it);
    return true;
  });
}

int Scheduler::EffectiveClass(const TransferRecord& record, absl::Time now) const {
  const int base = static_cast<int>(record.priority);
  if (base == 0 || ageing_ <= absl::ZeroDuration()) return base;
  const std::int64_t risen = (now - record.waiting_since) / ageing_;
  return risen >= base ? 0 : base - static_cast<int>(risen);
}

bool Scheduler::ChunkDue(const TransferRecord& record, absl::Time now) {
  if (record.next_offset < record.total()) return true;
  return std::any_of(record.redo.begin(), record.redo.end(),
                     [now](const ChunkRedo& redo) { return redo.not_before <= now; });
}

const RecordPtr* Scheduler::Choose(absl::Time now,
                                   absl::FunctionRef<bool(const TransferRecord&)> fits,
                                   bool* others_could_move) const {
  // Effective class, the uid's last turn, waiting since, id: least first.
  using Key = std::tuple<int, std::uint64_t, absl::Time, TransferId>;
  const RecordPtr* best = nullptr;        // Of every base priority.
  const RecordPtr* best_other = nullptr;  // Of a base priority below critical.
  Key best_key;
  Key other_key;
  for (const RecordPtr& record : records_) {
    if (record->terminal() || record->cancel_requested || record->blockers > 0) continue;
    if (!ChunkDue(*record, now) || !fits(*record)) continue;
    const auto uid = uids_.find(record->uid);
    const Key key(EffectiveClass(*record, now), uid == uids_.end() ? 0 : uid->second.last_turn,
                  record->waiting_since, record->id);
    if (best == nullptr || key < best_key) {
      best = &record;
      best_key = key;
    }
    if (record->priority != Priority::kCritical && (best_other == nullptr || key < other_key)) {
      best_other = &record;
      other_key = key;
    }
  }
  *others_could_move = best_other != nullptr;
  if (best != nullptr && (*best)->priority == Priority::kCritical && best_other != nullptr &&
      critical_run_ >= max_critical_run_) {
    return best_other;
  }
  return best;
}

Chunk Scheduler::Serve(const RecordPtr& chosen, bool others_could_move, absl::Time now) {
  critical_run_ =
      chosen->priority == Priority::kCritical && others_could_move ? critical_run_ + 1 : 0;
  uids_[chosen->uid].last_turn = ++turns_;
  return Cut(chosen, now);
}

std::optional<Chunk> Scheduler::Next(
    absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits) {
  bool others = false;
  const RecordPtr* chosen = Choose(now, fits, &others);
  if (chosen == nullptr) return std::nullopt;
  return Serve(*chosen, others, now);
}

std::optional<Chunk> Scheduler::NextCritical(
    absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits) {
  bool others = false;
  const RecordPtr* chosen = Choose(now, fits, &others);
  if (chosen == nullptr || (*chosen)->priority != Priority::kCritical) return std::nullopt;
  return Serve(*chosen, others, now);
}

Chunk Scheduler::Cut(const RecordPtr& record, absl::Time now) {
  TransferRecord& best = *record;
  Chunk chunk;
  chunk.record = record;
  // Retries first: they are the oldest bytes of the transfer.
  auto redo = std::find_if(best.redo.begin(), best.redo.end(),
                           [now](const ChunkRedo& r) { return r.not_before <= now; });
  if (redo != best.redo.end()) {
    chunk.offset = redo->offset;
    chunk.bytes = redo->bytes;
    chunk.attempt = redo->attempt;
    best.redo.erase(redo);
  } else {
    chunk.offset = best.next_offset;
    chunk.bytes = std::min(best.chunk_bytes, best.total() - best.next_offset);
    best.next_offset += chunk.bytes;
  }
  ++best.in_flight;
  best.waiting_since = now;
  return chunk;
}

absl::Time Scheduler::NextRetry() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const RecordPtr& record : records_) {
    for (const ChunkRedo& redo : record->redo) earliest = std::min(earliest, redo.not_before);
  }
  return earliest;
}

}  // namespace memd::transfer
