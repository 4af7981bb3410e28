#include "tools/replay/report.h"

namespace memd::replay {
namespace {

// numerator / denominator, or null when there is nothing to divide by.
nlohmann::ordered_json Ratio(std::uint64_t numerator, std::uint64_t denominator) {
  if (denominator == 0) return nullptr;
  return static_cast<double>(numerator) / static_cast<double>(denominator);
}

}  // namespace

nlohmann::ordered_json MakeReport(const ReportContext& context,
                                  const ReplayResult& result) {
  const bool unlimited = context.capacity_bytes == std::numeric_limits<std::uint64_t>::max();
  nlohmann::ordered_json report;
  report["policy"] = PolicyName(context.policy);
  report["trace"] = context.trace;
  report["events"] = result.events;
  report["allocations"] = result.allocations;
  report["frees"] = result.frees;
  // 2^64 - 1 does not survive tools that read numbers as doubles (jq).
  report["capacity_bytes"] =
      unlimited ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(context.capacity_bytes);
  report["alignment_bytes"] = context.alignment_bytes;
  report["warmup_fraction"] = context.warmup_fraction;
  report["peak_reserved_bytes"] = result.peak_reserved_bytes;
  report["peak_live_bytes"] = result.peak_live_bytes;
  report["live_allocations_at_peak"] = result.live_allocations_at_peak;
  report["overhead"] = Ratio(result.peak_reserved_bytes, result.peak_live_bytes);
  report["hit_rate"] = Ratio(result.hits, result.succeeded);
  report["hit_rate_after_warmup"] =
      Ratio(result.hits_after_warmup, result.succeeded_after_warmup);
  report["failed_allocations"] = result.failed;
  report["failed_with_room"] = result.failed_with_room;
  report["skipped_frees"] = result.skipped_frees;
  report["max_fragmentation"] = result.max_fragmentation;
  report["stats_every"] = context.stats_every;
  report["mean_alloc_ns"] = Ratio(result.allocate_ns, result.allocate_calls);
  report["peak_occupancy"] = unlimited ? nlohmann::ordered_json(nullptr)
                                       : Ratio(result.peak_live_bytes, context.capacity_bytes);
  return report;
}

}  // namespace memd::replay
