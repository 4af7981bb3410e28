#include "tools/replay/policy.h"

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "daemon/pool/carving_pool.h"
#include "tools/replay/exact_pool.h"
#include "tools/replay/pow2_pool.h"

namespace memd::replay {

absl::StatusOr<Policy> ParsePolicy(std::string_view name) {
  if (name == "memd") return Policy::kMemd;
  if (name == "pow2") return Policy::kPow2;
  if (name == "exact") return Policy::kExact;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy '", absl::string_view(name.data(), name.size()),
      "' (expected memd, pow2 or exact)"));
}

std::string PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kMemd: return "memd";
    case Policy::kPow2: return "pow2";
    case Policy::kExact: return "exact";
  }
  return "unknown";
}

std::unique_ptr<pool::Pool> MakeMemdPool(backend::Backend& backend,
                                         const Location& location,
                                         std::uint64_t limit_bytes) {
  // The engine with the daemon's default options; the clock only dates idle
  // segments, and replay never trims by time.
  static const RealClock clock;
  pool::CarvingPoolOptions options;
  options.limit_bytes = limit_bytes;
  return std::make_unique<pool::CarvingPool>(backend, location, options, clock);
}

std::unique_ptr<pool::Pool> MakePool(Policy policy, backend::Backend& backend,
                                     const Location& location,
                                     std::uint64_t limit_bytes) {
  switch (policy) {
    case Policy::kMemd: return MakeMemdPool(backend, location, limit_bytes);
    case Policy::kPow2: return std::make_unique<Pow2Pool>(backend, location, limit_bytes);
    case Policy::kExact: return std::make_unique<ExactPool>(backend, location, limit_bytes);
  }
  return nullptr;
}

}  // namespace memd::replay
