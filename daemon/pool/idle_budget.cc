#include "daemon/pool/idle_budget.h"

#include <algorithm>
#include <utility>

namespace memd::pool {

std::optional<IdleBudget::Scan> IdleBudget::Check(std::uint64_t demand_bytes,
                                                  std::uint64_t reserved_bytes) const {
  if (budget_ < 0) return std::nullopt;
  const double budget = static_cast<double>(demand_bytes) * (1.0 + budget_);
  const double reserved = static_cast<double>(reserved_bytes);
  if (reserved <= budget) return std::nullopt;
  const std::uint64_t events = idle_events_.load(std::memory_order_relaxed);
  if (events == idle_events_seen_.load(std::memory_order_relaxed)) return std::nullopt;
  return Scan{reserved - budget, events};
}

std::vector<IdleSegment> IdleBudget::Choose(std::vector<IdleSegment> idle,
                                            double excess_bytes, bool* all_taken) {
  std::sort(idle.begin(), idle.end(), [](const IdleSegment& a, const IdleSegment& b) {
    return a.size != b.size ? a.size > b.size : a.seq < b.seq;
  });
  std::vector<IdleSegment> chosen;
  for (const IdleSegment& segment : idle) {
    if (excess_bytes <= 0) break;
    chosen.push_back(segment);
    excess_bytes -= static_cast<double>(segment.size);
  }
  *all_taken = chosen.size() == idle.size();
  return chosen;
}

void IdleBudget::Scanned(const Scan& scan, bool left_none_idle) {
  if (left_none_idle) idle_events_seen_.store(scan.idle_events, std::memory_order_relaxed);
}

}  // namespace memd::pool
