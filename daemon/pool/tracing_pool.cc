#include "daemon/pool/tracing_pool.h"

#include <utility>

namespace memd::pool {

TracingPool::TracingPool(std::unique_ptr<Pool> inner, std::shared_ptr<TraceWriter> writer)
    : inner_(std::move(inner)), writer_(std::move(writer)) {}

absl::StatusOr<Allocation> TracingPool::Allocate(std::uint64_t bytes, Domain domain) {
  absl::StatusOr<Allocation> allocation = inner_->Allocate(bytes, domain);
  if (!allocation.ok()) return allocation;
  const std::uint64_t trace_id = writer_->NextId();
  {
    absl::MutexLock lock(&mu_);
    inner_ids_.emplace(trace_id, allocation->id);
  }
  allocation->id = trace_id;
  // A write error stays in the writer (see the class comment).
  writer_->Write(TraceEvent::Allocate(trace_id, bytes)).IgnoreError();
  return allocation;
}

absl::StatusOr<std::vector<Allocation>> TracingPool::Adopt(AdoptedSegment segment) {
  absl::StatusOr<std::vector<Allocation>> allocations = inner_->Adopt(std::move(segment));
  if (!allocations.ok()) return allocations;
  for (Allocation& allocation : *allocations) {
    const std::uint64_t trace_id = writer_->NextId();
    {
      absl::MutexLock lock(&mu_);
      inner_ids_.emplace(trace_id, allocation.id);
    }
    allocation.id = trace_id;
    writer_->Write(TraceEvent::Allocate(trace_id, allocation.bytes)).IgnoreError();
  }
  return allocations;
}

void TracingPool::Free(Allocation allocation) {
  const std::uint64_t trace_id = allocation.id;
  bool traced = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = inner_ids_.find(trace_id);
    if (it != inner_ids_.end()) {
      traced = true;
      allocation.id = it->second;
      inner_ids_.erase(it);
    }
  }
  // Written before the memory goes back, so that in the file this
  // allocation has ended before anything else can be given its memory.
  if (traced) writer_->Write(TraceEvent::Free(trace_id)).IgnoreError();
  inner_->Free(std::move(allocation));
}

}  // namespace memd::pool
