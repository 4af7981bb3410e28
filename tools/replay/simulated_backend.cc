#include "tools/replay/simulated_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::replay {

class SimulatedBackend::SimulatedSegment : public backend::Segment {
 public:
  SimulatedSegment(std::shared_ptr<Counters> counters, std::uint64_t bytes)
      : counters_(std::move(counters)), bytes_(bytes) {}
  ~SimulatedSegment() override {
    absl::MutexLock lock(&counters_->mu);
    counters_->reserved_bytes -= bytes_;
  }

  std::uint64_t size() const override { return bytes_; }
  absl::StatusOr<backend::ExportedHandle> Export(backend::Access access) const override {
    return absl::InternalError("a simulated segment has no memory to export");
  }

 private:
  const std::shared_ptr<Counters> counters_;
  const std::uint64_t bytes_;
};

SimulatedBackend::SimulatedBackend(SimulatedBackendOptions options)
    : options_(options), counters_(std::make_shared<Counters>()) {}

absl::StatusOr<std::unique_ptr<backend::Segment>> SimulatedBackend::Reserve(
    const Location& where, std::uint64_t bytes) {
  absl::MutexLock lock(&counters_->mu);
  ++counters_->reserve_calls;
  if (where != location()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the simulated backend serves ", location().ToString(), ", not ", where.ToString()));
  }
  if (bytes == 0 || bytes % options_.alignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reserve ", bytes, " bytes: not a positive multiple of ", options_.alignment));
  }
  const std::uint64_t reserved = counters_->reserved_bytes;
  if (bytes > options_.capacity_bytes - reserved) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "simulated ", location().ToString(), ": cannot reserve ", bytes, " bytes (",
        FormatBytes(bytes), "): ", reserved, " of ", options_.capacity_bytes,
        " bytes (", FormatBytes(options_.capacity_bytes), ") are reserved"));
  }
  counters_->reserved_bytes = reserved + bytes;
  if (counters_->reserved_bytes > counters_->peak_reserved_bytes) {
    counters_->peak_reserved_bytes = counters_->reserved_bytes;
  }
  return std::unique_ptr<backend::Segment>(new SimulatedSegment(counters_, bytes));
}

std::uint64_t SimulatedBackend::reserved_bytes() const {
  absl::MutexLock lock(&counters_->mu);
  return counters_->reserved_bytes;
}

std::uint64_t SimulatedBackend::peak_reserved_bytes() const {
  absl::MutexLock lock(&counters_->mu);
  return counters_->peak_reserved_bytes;
}

std::uint64_t SimulatedBackend::reserve_calls() const {
  absl::MutexLock lock(&counters_->mu);
  return counters_->reserve_calls;
}

}  // namespace memd::replay
