#include "tools/replay/replay.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pool/trace_format.h"

namespace memd::replay {
namespace {

// One domain for the whole trace: traces do not record domains, and one
// keeps pools from splitting memory between them.
constexpr pool::Domain kDomain{1000, 1000, 0600};

struct Live {
  pool::Allocation allocation;
  std::uint64_t requested = 0;
};

bool IsRefusal(const absl::Status& status) {
  return absl::IsResourceExhausted(status) || absl::IsInvalidArgument(status);
}

}  // namespace

absl::StatusOr<TraceSummary> SummarizeTrace(std::istream& trace) {
  pool::TraceReader reader(trace);
  TraceSummary summary;
  absl::flat_hash_map<std::uint64_t, std::uint64_t> sizes;
  std::uint64_t live_bytes = 0;
  for (;;) {
    MEMD_ASSIGN_OR_RETURN(std::optional<pool::TraceEvent> event, reader.Next());
    if (!event.has_value()) break;
    ++summary.events;
    if (event->op == pool::TraceEvent::Op::kAllocate) {
      ++summary.allocations;
      sizes[event->id] = event->bytes;
      if (event->bytes > ~std::uint64_t{0} - live_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", reader.line_number(), ": live bytes exceed 2^64"));
      }
      live_bytes += event->bytes;
      summary.peak_live_bytes = std::max(summary.peak_live_bytes, live_bytes);
    } else {
      ++summary.frees;
      auto it = sizes.find(event->id);
      live_bytes -= it->second;  // The reader checked that the id is live.
      sizes.erase(it);
    }
  }
  return summary;
}

absl::StatusOr<ReplayResult> Replay(std::istream& trace, pool::Pool& pool,
                                    const SimulatedBackend& backend,
                                    std::uint64_t warmup_allocations,
                                    std::uint64_t stats_every) {
  pool::TraceReader reader(trace);
  ReplayResult result;
  absl::flat_hash_map<std::uint64_t, Live> live;
  std::uint64_t live_bytes = 0;
  const std::uint64_t capacity = backend.capacity_bytes();
  absl::Status failure;

  for (;;) {
    absl::StatusOr<std::optional<pool::TraceEvent>> next = reader.Next();
    if (!next.ok()) {
      failure = next.status();
      break;
    }
    if (!next->has_value()) break;
    const pool::TraceEvent& event = **next;
    ++result.events;

    if (event.op == pool::TraceEvent::Op::kAllocate) {
      const bool warm = result.allocations++ >= warmup_allocations;
      const std::uint64_t reserve_calls = backend.reserve_calls();
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<pool::Allocation> allocation = pool.Allocate(event.bytes, kDomain);
      const auto end = std::chrono::steady_clock::now();
      ++result.allocate_calls;
      result.allocate_ns += static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
      if (!allocation.ok()) {
        if (!IsRefusal(allocation.status())) {
          failure = absl::InternalError(absl::StrCat(
              "line ", reader.line_number(), ": allocation of ", event.bytes,
              " bytes failed: ", allocation.status().ToString()));
          break;
        }
        ++result.failed;
        if (capacity >= live_bytes && capacity - live_bytes >= event.bytes) {
          ++result.failed_with_room;
        }
      } else {
        const bool hit = backend.reserve_calls() == reserve_calls;
        ++result.succeeded;
        result.hits += hit ? 1 : 0;
        if (warm) {
          ++result.succeeded_after_warmup;
          result.hits_after_warmup += hit ? 1 : 0;
        }
        live.emplace(event.id, Live{std::move(*allocation), event.bytes});
        live_bytes += event.bytes;
        if (live_bytes > result.peak_live_bytes) {
          result.peak_live_bytes = live_bytes;
          result.live_allocations_at_peak = live.size();
        }
      }
    } else {
      ++result.frees;
      auto it = live.find(event.id);
      if (it == live.end()) {
        ++result.skipped_frees;  // Its allocation was refused.
      } else {
        live_bytes -= it->second.requested;
        pool.Free(std::move(it->second.allocation));
        live.erase(it);
      }
    }
    if (result.events % stats_every == 0) {
      result.max_fragmentation =
          std::max(result.max_fragmentation, pool.Stats().fragmentation());
    }
  }

  result.peak_reserved_bytes = backend.peak_reserved_bytes();
  // Pools may insist that everything is freed before they go.
  for (auto& [id, entry] : live) pool.Free(std::move(entry.allocation));
  if (!failure.ok()) return failure;
  return result;
}

}  // namespace memd::replay
