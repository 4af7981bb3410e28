#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pool/trace_format.h"

namespace memd::tracegen {

/// What a workload writes through: allocations get the writer's next id
/// (1, 2, 3, ...) and the builder counts events. Borrows the writer. Not
/// thread-safe.
class TraceBuilder {
 public:
  explicit TraceBuilder(pool::TraceWriter& writer) : writer_(writer) {}

  // Records an allocation of `bytes` (> 0); returns its id.
  std::uint64_t Allocate(std::uint64_t bytes);
  // Records the free of a live id.
  void Free(std::uint64_t id);

  std::uint64_t events() const { return events_; }

  // The writer's sticky status (pool::TraceWriter::Write).
  absl::Status status() const { return writer_.status(); }

 private:
  pool::TraceWriter& writer_;
  std::uint64_t events_ = 0;
};

}  // namespace memd::tracegen
