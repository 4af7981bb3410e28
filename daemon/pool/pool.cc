#include "daemon/pool/pool.h"

#include "absl/strings/str_format.h"

namespace memd::pool {

std::string Domain::ToString() const {
  std::string text = absl::StrFormat("uid %d gid %d mode 0%o", uid, gid, mode);
  if (numa_node >= 0) absl::StrAppendFormat(&text, " numa node %d", numa_node);
  return text;
}

absl::StatusOr<ExportedHandle> Allocation::Export(Access access) const {
  if (segment_ == nullptr) {
    return absl::FailedPreconditionError("the allocation has no segment to export");
  }
  return segment_->Export(access);
}

absl::StatusOr<backend::SegmentMemory> Allocation::Memory() const {
  if (segment_ == nullptr) {
    return absl::FailedPreconditionError("the allocation has no segment to reach");
  }
  absl::StatusOr<backend::SegmentMemory> memory = segment_->Memory();
  if (!memory.ok()) return memory.status();
  return memory->At(offset);
}

std::uint64_t Allocation::segment_bytes() const {
  return segment_ == nullptr ? 0 : segment_->size();
}

}  // namespace memd::pool
