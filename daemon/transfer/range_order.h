#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/transfer/transfer_record.h"

namespace memd::transfer {

/// Keeps transfers that touch the same bytes in submission order, whatever
/// their priorities: a transfer that writes a range an earlier unfinished
/// one reads or writes, or reads a range it writes (same buffer_id,
/// overlapping [offset, offset + length)), waits until that one ends.
/// Endpoints with buffer_id 0 name no buffer and order nothing.
/// Thread-compatible: the engine calls it under its mutex.
class RangeOrder {
 public:
  // Records `record`'s ranges and counts in record->blockers the earlier
  // unfinished transfers it must wait for (each lists it as a dependent).
  void Admit(const RecordPtr& record);
  // The transfer ended: forgets its ranges and returns the dependents it
  // was the last blocker of (they may run now).
  std::vector<RecordPtr> Release(TransferRecord& record);

 private:
  struct Range {
    TransferRecord* record;
    std::uint64_t offset;
    std::uint64_t length;
    bool writes;
  };
  void Add(TransferRecord* record, const Endpoint& endpoint, bool writes);

  absl::flat_hash_map<std::uint64_t, std::vector<Range>> ranges_;  // By buffer_id.
};

}  // namespace memd::transfer
