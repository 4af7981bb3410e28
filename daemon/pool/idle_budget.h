#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "daemon/pool/idle_segments.h"

namespace memd::pool {

/// The growth rule of CarvingPoolOptions::idle_budget: before reserving a
/// segment, the pool gives back idle segments, largest first, until it
/// would hold at most (1 + budget) times its demand — the most ever in use,
/// or what is in use with the new allocation if more. Against the peak, not
/// the use of the moment: a workload that frees everything between rounds
/// (a training step) needs its memory back at the next round, and idle
/// time, not growth, is what returns it.
///
/// Decides what to give back; the pool detaches and releases it. Also
/// counts segments going idle, so that the pool skips the scan when none
/// went idle since one that left none to give back. Thread-safe (atomics).
class IdleBudget {
 public:
  // Negative: keep every idle segment (until the limit or trim).
  explicit IdleBudget(double budget) : budget_(budget) {}

  // A scan to make: the bytes to give back and the idle count it saw.
  struct Scan {
    double excess_bytes = 0;
    std::uint64_t idle_events = 0;
  };
  // Whether to scan before reserving, for a pool whose demand is
  // `demand_bytes` and that would then hold `reserved_bytes`; nullopt when
  // that keeps within the budget, or no segment went idle since a scan
  // that left none idle.
  std::optional<Scan> Check(std::uint64_t demand_bytes,
                            std::uint64_t reserved_bytes) const;
  // The segments to give back: largest first (the fewest), until their
  // bytes cover the excess. `all_taken`: whether that was every one.
  static std::vector<IdleSegment> Choose(std::vector<IdleSegment> idle,
                                         double excess_bytes, bool* all_taken);
  // Reports a scan's outcome: `left_none_idle` when it took every idle
  // segment and saw none held elsewhere (a held segment is let go without
  // an event the pool sees, so while any is left the next growth looks
  // again).
  void Scanned(const Scan& scan, bool left_none_idle);

  // Called when a segment's last live allocation is freed.
  void NoteIdle() { idle_events_.fetch_add(1, std::memory_order_relaxed); }

 private:
  const double budget_;
  std::atomic<std::uint64_t> idle_events_{0};
  std::atomic<std::uint64_t> idle_events_seen_{~std::uint64_t{0}};
};

}  // namespace memd::pool
