#pragma once

// Replaying a trace (daemon/pool/trace_format.h) against one pool over the
// simulated backend, and what it measures.

#include <cstdint>
#include <istream>

#include "absl/status/statusor.h"
#include "daemon/pool/pool.h"
#include "tools/replay/simulated_backend.h"

namespace memd::replay {

// What a trace asks for, whatever pool serves it: the first of the two
// passes over a trace (it also checks the whole trace before any pool runs).
struct TraceSummary {
  std::uint64_t events = 0;
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  // Most bytes live at once, as requested, if every allocation succeeds.
  std::uint64_t peak_live_bytes = 0;
};

// Errors: those of TraceReader ("line N: ..." for a malformed trace).
absl::StatusOr<TraceSummary> SummarizeTrace(std::istream& trace);

// What one replay measured. Counters only; report.h derives the ratios.
struct ReplayResult {
  std::uint64_t events = 0;
  std::uint64_t allocations = 0;  // Allocation events, failed ones included.
  std::uint64_t frees = 0;        // Free events, skipped ones included.
  std::uint64_t skipped_frees = 0;  // Of allocations that had failed.

  // Allocations that succeeded, and those of them the pool served without
  // calling Backend::Reserve (hits).
  std::uint64_t succeeded = 0;
  std::uint64_t hits = 0;
  // The same, counting only allocation events from index
  // `warmup_allocations` on (0-based, failed ones included in the index).
  std::uint64_t succeeded_after_warmup = 0;
  std::uint64_t hits_after_warmup = 0;

  // Allocations the pool refused (RESOURCE_EXHAUSTED or INVALID_ARGUMENT),
  // and those of them for which capacity minus the live requested bytes was
  // at least the request.
  std::uint64_t failed = 0;
  std::uint64_t failed_with_room = 0;

  // Bytes the backend held at its peak (SimulatedBackend's count).
  std::uint64_t peak_reserved_bytes = 0;
  // Most requested bytes in live allocations at once, and how many live
  // allocations held them.
  std::uint64_t peak_live_bytes = 0;
  std::uint64_t live_allocations_at_peak = 0;

  // Largest PoolStats::fragmentation() of the snapshots taken after every
  // `stats_every`-th event.
  double max_fragmentation = 0;

  // Time inside Pool::Allocate (steady clock), over every call.
  std::uint64_t allocate_calls = 0;
  std::uint64_t allocate_ns = 0;
};

// Replays `trace` against `pool`, which must reserve from `backend` and
// nothing else, in one thread. Every allocation uses one fixed domain.
// Pool::Stats() is sampled after every `stats_every`-th event (1: all; a
// pool's Stats may cost microseconds, which adds up over a huge trace). A
// refused allocation is counted and its id is not live, so its free is
// skipped; allocations still live at the end of the trace are freed after
// the measurements. Errors: those of TraceReader; INTERNAL "line N: ..."
// when the pool fails an allocation with any other code.
absl::StatusOr<ReplayResult> Replay(std::istream& trace, pool::Pool& pool,
                                    const SimulatedBackend& backend,
                                    std::uint64_t warmup_allocations,
                                    std::uint64_t stats_every = 1);

}  // namespace memd::replay
