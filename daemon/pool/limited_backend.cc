#include "daemon/pool/limited_backend.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::pool {
namespace {

// Marks a refusal at the limit (a status payload: the code alone cannot tell
// it from the backend running out of memory).
constexpr char kLimitRefusal[] = "type.memd.dev/pool.LimitRefusal";

}  // namespace

// A segment of the inner backend that gives its bytes back to the counts
// when destroyed. Shared, not owned, only for Count's segments, whose
// caller is meant to pass its only reference.
class LimitedBackend::CountedSegment : public backend::Segment {
 public:
  CountedSegment(std::shared_ptr<backend::Segment> inner, std::uint64_t bytes,
                 std::shared_ptr<Counts> counts)
      : inner_(std::move(inner)), bytes_(bytes), counts_(std::move(counts)) {}
  ~CountedSegment() override {
    inner_.reset();  // The memory goes back before the count drops.
    counts_->segments.fetch_sub(1, std::memory_order_relaxed);
    counts_->reserved.fetch_sub(bytes_, std::memory_order_relaxed);
  }

  std::uint64_t size() const override { return inner_->size(); }
  absl::StatusOr<backend::ExportedHandle> Export(backend::Access access) const override {
    return inner_->Export(access);
  }
  absl::Status Scrub() override { return inner_->Scrub(); }
  void Discard() override { inner_->Discard(); }
  absl::StatusOr<backend::SegmentMemory> Memory() const override {
    return inner_->Memory();
  }
  int DurableFd() const override { return inner_->DurableFd(); }

 private:
  std::shared_ptr<backend::Segment> inner_;
  const std::uint64_t bytes_;  // As counted: what was asked for.
  const std::shared_ptr<Counts> counts_;
};

LimitedBackend::LimitedBackend(backend::Backend& inner, std::uint64_t limit_bytes)
    : inner_(inner), limit_bytes_(limit_bytes), counts_(std::make_shared<Counts>()) {}

void LimitedBackend::RaisePeak(std::uint64_t reserved) {
  std::uint64_t peak = counts_->peak_reserved.load(std::memory_order_relaxed);
  while (reserved > peak && !counts_->peak_reserved.compare_exchange_weak(
                                peak, reserved, std::memory_order_relaxed)) {
  }
}

bool LimitedBackend::TryCount(std::uint64_t bytes) {
  std::uint64_t reserved = counts_->reserved.load(std::memory_order_relaxed);
  do {
    const std::uint64_t after = reserved + bytes;
    if (after < reserved || after > limit_bytes_) return false;
  } while (!counts_->reserved.compare_exchange_weak(reserved, reserved + bytes,
                                                    std::memory_order_relaxed));
  RaisePeak(reserved + bytes);
  return true;
}

absl::StatusOr<std::unique_ptr<backend::Segment>> LimitedBackend::Reserve(
    const Location& location, std::uint64_t bytes) {
  return ReserveOnNode(location, bytes, -1);
}

absl::StatusOr<std::unique_ptr<backend::Segment>> LimitedBackend::ReserveOnNode(
    const Location& location, std::uint64_t bytes, int numa_node) {
  if (!TryCount(bytes)) return Refusal(location, bytes, "reserve");
  absl::StatusOr<std::unique_ptr<backend::Segment>> segment =
      numa_node < 0 ? inner_.Reserve(location, bytes)
                    : inner_.ReserveOnNode(location, bytes, numa_node);
  if (!segment.ok()) {
    counts_->reserved.fetch_sub(bytes, std::memory_order_relaxed);
    return segment.status();
  }
  counts_->segments.fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<backend::Segment>(
      new CountedSegment(std::move(*segment), bytes, counts_));
}

void LimitedBackend::CountAdopted(std::uint64_t bytes) {
  RaisePeak(counts_->reserved.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  counts_->segments.fetch_add(1, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<backend::Segment>> LimitedBackend::Adopt(
    const Location& location, std::uint64_t bytes, UniqueFd fd) {
  absl::StatusOr<std::unique_ptr<backend::Segment>> segment =
      inner_.Adopt(location, bytes, std::move(fd));
  if (!segment.ok()) return segment.status();
  CountAdopted(bytes);
  return std::unique_ptr<backend::Segment>(
      new CountedSegment(std::move(*segment), bytes, counts_));
}

std::shared_ptr<backend::Segment> LimitedBackend::Count(
    std::shared_ptr<backend::Segment> segment) {
  const std::uint64_t bytes = segment->size();
  CountAdopted(bytes);
  return std::shared_ptr<backend::Segment>(
      new CountedSegment(std::move(segment), bytes, counts_));
}

absl::Status LimitedBackend::Refusal(const Location& location, std::uint64_t bytes,
                                     std::string_view verb) const {
  absl::Status refusal = absl::ResourceExhaustedError(absl::StrCat(
      location.ToString(), " pool: cannot ", absl::string_view(verb.data(), verb.size()),
      " ", bytes, " bytes (", FormatBytes(bytes), "): ", reserved_bytes(),
      " of the limit ", limit_bytes_, " bytes (", FormatBytes(limit_bytes_),
      ") are reserved"));
  refusal.SetPayload(kLimitRefusal, absl::Cord());
  return refusal;
}

bool LimitedBackend::IsLimitRefusal(const absl::Status& status) {
  return status.GetPayload(kLimitRefusal).has_value();
}

}  // namespace memd::pool
