#include "daemon/transfer/range_order.h"

#include <algorithm>

namespace memd::transfer {
namespace {

bool Overlap(std::uint64_t a_offset, std::uint64_t a_length, std::uint64_t b_offset,
             std::uint64_t b_length) {
  return a_offset < b_offset + b_length && b_offset < a_offset + a_length;
}

}  // namespace

void RangeOrder::Admit(const RecordPtr& record) {
  std::vector<TransferRecord*> blockers;
  const auto collect = [&](const Endpoint& endpoint, bool writes) {
    if (endpoint.buffer_id == 0) return;
    auto it = ranges_.find(endpoint.buffer_id);
    if (it == ranges_.end()) return;
    for (const Range& range : it->second) {
      if (!writes && !range.writes) continue;  // Two readers never conflict.
      if (!Overlap(endpoint.offset, endpoint.length, range.offset, range.length)) continue;
      if (std::find(blockers.begin(), blockers.end(), range.record) == blockers.end()) {
        blockers.push_back(range.record);
      }
    }
  };
  collect(record->source, /*writes=*/false);
  collect(record->destination, /*writes=*/true);
  for (TransferRecord* earlier : blockers) {
    earlier->dependents.push_back(record);
    ++record->blockers;
  }
  Add(record.get(), record->source, /*writes=*/false);
  Add(record.get(), record->destination, /*writes=*/true);
}

void RangeOrder::Add(TransferRecord* record, const Endpoint& endpoint, bool writes) {
  if (endpoint.buffer_id == 0) return;
  ranges_[endpoint.buffer_id].push_back(
      Range{record, endpoint.offset, endpoint.length, writes});
}

std::vector<RecordPtr> RangeOrder::Release(TransferRecord& record) {
  for (const Endpoint* endpoint : {&record.source, &record.destination}) {
    auto it = ranges_.find(endpoint->buffer_id);
    if (it == ranges_.end()) continue;
    std::erase_if(it->second, [&](const Range& range) { return range.record == &record; });
    if (it->second.empty()) ranges_.erase(it);
  }
  std::vector<RecordPtr> runnable;
  for (RecordPtr& dependent : record.dependents) {
    if (--dependent->blockers == 0) runnable.push_back(std::move(dependent));
  }
  record.dependents.clear();
  return runnable;
}

}  // namespace memd::transfer
