#include "daemon/backend/factory.h"

#include "absl/strings/str_cat.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::backend {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view kind) {
  if (kind == "auto" || kind == "host") {
    // No GPU backend is built into this version yet, so auto means host.
    return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  }
  if (kind == "cuda" || kind == "level_zero") {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend '", std::string(kind),
        "' is not part of this version of memd; use --backend host or auto"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", std::string(kind),
                   "'; expected auto, host, cuda or level_zero"));
}

}  // namespace memd::backend
