#include "daemon/transfer/scheduler.h"

#include <algorithm>
#include <tuple>

namespace memd::transfer {

void Scheduler::DropTerminal() {
  std::erase_if(records_, [](const RecordPtr& record) { return record->terminal(); });
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

std::optional<Chunk> Scheduler::Next(
    absl::Time now, absl::FunctionRef<bool(const TransferRecord&)> fits) {
  const RecordPtr* chosen = nullptr;
  std::tuple<int, absl::Time, TransferId> chosen_key;
  for (const RecordPtr& record : records_) {
    if (record->terminal() || record->cancel_requested || record->blockers > 0) continue;
    if (!ChunkDue(*record, now) || !fits(*record)) continue;
    std::tuple<int, absl::Time, TransferId> key(EffectiveClass(*record, now),
                                                 record->waiting_since, record->id);
    if (chosen == nullptr || key < chosen_key) {
      chosen = &record;
      chosen_key = key;
    }
  }
  if (chosen == nullptr) return std::nullopt;
  TransferRecord* best = chosen->get();
  Chunk chunk;
  chunk.record = *chosen;
  // Retries first: they are the oldest bytes of the transfer.
  auto redo = std::find_if(best->redo.begin(), best->redo.end(),
                           [now](const ChunkRedo& r) { return r.not_before <= now; });
  if (redo != best->redo.end()) {
    chunk.offset = redo->offset;
    chunk.bytes = redo->bytes;
    chunk.attempt = redo->attempt;
    best->redo.erase(redo);
  } else {
    chunk.offset = best->next_offset;
    chunk.bytes = std::min(best->chunk_bytes, best->total() - best->next_offset);
    best->next_offset += chunk.bytes;
  }
  ++best->in_flight;
  best->waiting_since = now;
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
