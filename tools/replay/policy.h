#pragma once

// The pools memd-replay compares: the daemon's own engine and two
// baselines. Swapping the engine in or out is a change to MakeMemdPool only.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/pool.h"

namespace memd::replay {

enum class Policy { kMemd, kPow2, kExact };

// "memd", "pow2", "exact". Errors: INVALID_ARGUMENT naming the choices.
absl::StatusOr<Policy> ParsePolicy(std::string_view name);
std::string PolicyName(Policy policy);

// The pool the daemon runs, over `backend` at `location`, reserving at most
// `limit_bytes`.
std::unique_ptr<pool::Pool> MakeMemdPool(backend::Backend& backend,
                                         const Location& location,
                                         std::uint64_t limit_bytes);

// The pool of `policy`. The backend must outlive it.
std::unique_ptr<pool::Pool> MakePool(Policy policy, backend::Backend& backend,
                                     const Location& location,
                                     std::uint64_t limit_bytes);

}  // namespace memd::replay
