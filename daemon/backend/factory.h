#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"

namespace memd::backend {

// Chooses the backend for `kind` ("auto", "host", "cuda", "level_zero").
// "auto" takes the first GPU backend that finds a device, else host.
// Errors: INVALID_ARGUMENT (unknown kind), FAILED_PRECONDITION (the asked-for
// backend cannot run on this node, with the reason).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view kind);

}  // namespace memd::backend
