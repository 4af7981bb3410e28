#pragma once

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/trace_format.h"

namespace memd::pool {

/// Records every Allocate and Free of the pool it wraps to a trace
/// (trace_format.h), for memd-replay. Owns the inner pool; shares the
/// writer with the other locations' pools, so one file holds them all and
/// the writer's ids keep them apart. Thread-safe.
///
/// An allocation is recorded with the size the caller asked for, not the
/// rounded one, so a replay lets each pool round its own way; it gets a
/// fresh trace id in Allocation::id (the inner pool's id is kept aside and
/// restored before the inner Free). The "a" line is written after the inner
/// pool has answered and the "f" line before the memory goes back, so the
/// trace's live set never holds more than the pool's. Failed allocations
/// are not recorded. A failing trace file never fails an allocation: the
/// writer keeps the error for TraceWriter::Flush().
///
/// Errors: those of the inner pool.
class TracingPool : public Pool {
 public:
  TracingPool(std::unique_ptr<Pool> inner, std::shared_ptr<TraceWriter> writer);

  const Location& location() const override { return inner_->location(); }
  std::uint64_t alignment() const override { return inner_->alignment(); }
  absl::StatusOr<Allocation> Allocate(std::uint64_t bytes, Domain domain) override;
  std::uint64_t AllocationBytes(std::uint64_t bytes) const override {
    return inner_->AllocationBytes(bytes);
  }
  // An allocation this pool did not make goes to the inner pool untouched
  // and unrecorded.
  void Free(Allocation allocation) override;
  std::uint64_t Trim(absl::Duration min_idle) override { return inner_->Trim(min_idle); }
  PoolStats Stats() const override { return inner_->Stats(); }
  // The inner pool's, each given a trace id and recorded as allocated
  // (with its bytes) at adoption, so that the trace's live set holds them.
  absl::StatusOr<std::vector<Allocation>> Adopt(AdoptedSegment segment) override;

 private:
  const std::unique_ptr<Pool> inner_;
  const std::shared_ptr<TraceWriter> writer_;

  absl::Mutex mu_;
  // Trace id -> the inner pool's id, for every live allocation.
  absl::flat_hash_map<std::uint64_t, std::uint64_t> inner_ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::pool
