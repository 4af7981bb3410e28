#include "daemon/backend/level_zero/ze_copy_errors.h"

#include <string>

namespace memd::backend {

bool IsStickyZeError(ze_result_t result) {
  return result == ZE_RESULT_ERROR_DEVICE_LOST || result == ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET;
}

// From Loader::Check's code, which already sorts the results by what a
// caller can do; the copy side only tells a retry from a bug more finely.
absl::Status ZeCopyStatus(const ze::Loader& loader, ze_result_t result, std::string_view call,
                          int device, CopyCall kind) {
  const absl::Status checked = loader.Check(result, call, device);
  if (checked.ok()) return checked;
  const std::string message(checked.message());
  if (IsStickyZeError(result)) {
    return absl::InternalError(message + "; the device is unusable until memd restarts");
  }
  switch (checked.code()) {
    case absl::StatusCode::kResourceExhausted:  // Out of host or device memory.
      return kind == CopyCall::kStaging ? checked : absl::UnavailableError(message);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnavailable:  // Not available now, low power, ...
      return checked;
    default:
      return kind == CopyCall::kSurface ? absl::UnavailableError(message)
                                        : absl::InternalError(message);
  }
}

}  // namespace memd::backend
