#pragma once

// memd-replay's output: one JSON object, snake_case fields in a fixed order.
//
//   policy                    memd, pow2 or exact
//   trace                     the trace file, as given
//   events, allocations, frees   lines of the trace, by kind
//   capacity_bytes            the simulated device's size; null: unlimited
//   alignment_bytes           the backend's alignment
//   warmup_fraction           --warmup
//   peak_reserved_bytes       most bytes the backend held at once
//   peak_live_bytes           most requested bytes live at once
//   live_allocations_at_peak  live allocations at that moment
//   overhead                  peak_reserved_bytes / peak_live_bytes (null: 0)
//   hit_rate                  allocations served without Backend::Reserve /
//                             allocations that succeeded (null: none did)
//   hit_rate_after_warmup     the same over allocation events after the
//                             first floor(warmup_fraction * allocations)
//   failed_allocations        allocations the pool refused
//   failed_with_room          refused ones for which capacity - live
//                             requested bytes >= the request
//   skipped_frees             frees of refused allocations
//   max_fragmentation         largest PoolStats::fragmentation() over the
//                             snapshots taken after every stats_every-th
//                             event
//   stats_every               --stats-every (default 1: every event)
//   mean_alloc_ns             mean time of Pool::Allocate, every call
//   peak_occupancy            peak_live_bytes / capacity_bytes (null:
//                             unlimited)

#include <cstdint>
#include <limits>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/replay/policy.h"
#include "tools/replay/replay.h"

namespace memd::replay {

struct ReportContext {
  Policy policy = Policy::kMemd;
  std::string trace;
  std::uint64_t capacity_bytes = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t alignment_bytes = 0;
  double warmup_fraction = 0;
  std::uint64_t stats_every = 1;
};

nlohmann::ordered_json MakeReport(const ReportContext& context,
                                  const ReplayResult& result);

}  // namespace memd::replay
