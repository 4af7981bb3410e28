#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"

namespace memd::pool {

/// The pool limit, as a layer over the backend: reserves through another
/// backend while the bytes of the segments reserved through it and still
/// alive stay within `limit_bytes`, and counts them (reserved now, the
/// peak, segments alive). The limit bounds what memd holds from the
/// backend, so it sits where memory is reserved, not where allocations are
/// made: a size-class hit reserves nothing, a miss reserves a whole segment.
///
/// A refusal is RESOURCE_EXHAUSTED with the numbers (asked, reserved, the
/// limit), and IsLimitRefusal tells it from the inner backend running out.
/// CarvingPool trims idle segments and retries once on either, then counts
/// a final refusal at the limit and adds what only it knows (bytes in use,
/// idle segments held elsewhere) to the message.
///
/// Borrows the inner backend, which must outlive it and every segment it
/// reserved; the segments may outlive this object (their counts are shared).
/// Thread-safe: the limit is checked and counted with atomics.
/// Errors: RESOURCE_EXHAUSTED (the limit), those of the inner backend.
class LimitedBackend : public backend::Backend {
 public:
  LimitedBackend(backend::Backend& inner, std::uint64_t limit_bytes);

  std::string_view name() const override { return inner_.name(); }
  std::vector<Location> locations() const override { return inner_.locations(); }
  std::vector<backend::DeviceInfo> devices() const override { return inner_.devices(); }
  std::uint64_t alignment(const Location& location) const override {
    return inner_.alignment(location);
  }
  absl::StatusOr<std::unique_ptr<backend::Segment>> Reserve(
      const Location& location, std::uint64_t bytes) override;
  // Reserve, placed on a NUMA node by the inner backend; counted alike.
  absl::StatusOr<std::unique_ptr<backend::Segment>> ReserveOnNode(const Location& location,
                                                                  std::uint64_t bytes,
                                                                  int numa_node) override;
  // The inner backend's Adopt, counted like a reservation but never
  // refused by the limit: adopted memory exists already, holding buffers of
  // a previous memd, and a limit lowered across a restart must not destroy
  // them. Reservations are refused until the pool is back under the limit.
  // Errors: the inner backend's.
  absl::StatusOr<std::unique_ptr<backend::Segment>> Adopt(const Location& location,
                                                          std::uint64_t bytes,
                                                          UniqueFd fd) override;
  // Counts a segment adopted elsewhere (Pool::Adopt) as reserved through
  // this layer, past the limit if need be (as Adopt), until the returned
  // segment is destroyed.
  std::shared_ptr<backend::Segment> Count(std::shared_ptr<backend::Segment> segment);

  std::uint64_t limit_bytes() const { return limit_bytes_; }
  std::uint64_t reserved_bytes() const {
    return counts_->reserved.load(std::memory_order_relaxed);
  }
  std::uint64_t peak_reserved_bytes() const {
    return counts_->peak_reserved.load(std::memory_order_relaxed);
  }
  std::uint64_t segments() const {
    return counts_->segments.load(std::memory_order_relaxed);
  }

  // Whether `status` is this layer's refusal at the limit.
  static bool IsLimitRefusal(const absl::Status& status);

 private:
  // Shared with every segment reserved, which gives its bytes back when it
  // is destroyed.
  struct Counts {
    std::atomic<std::uint64_t> reserved{0};
    std::atomic<std::uint64_t> peak_reserved{0};
    std::atomic<std::uint64_t> segments{0};
  };
  class CountedSegment;

  // Counts `bytes` as reserved if that keeps within the limit.
  bool TryCount(std::uint64_t bytes);
  // Counts an adopted segment's `bytes`, whatever the limit.
  void CountAdopted(std::uint64_t bytes);
  // Moves the peak up to `reserved` if it is higher.
  void RaisePeak(std::uint64_t reserved);
  // The refusal at the limit for `bytes` that `verb` ("reserve", "adopt").
  absl::Status Refusal(const Location& location, std::uint64_t bytes,
                       std::string_view verb) const;

  backend::Backend& inner_;
  const std::uint64_t limit_bytes_;
  const std::shared_ptr<Counts> counts_;
};

}  // namespace memd::pool
