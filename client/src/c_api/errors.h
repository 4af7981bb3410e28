#pragma once

// How the C API reports: absl::Status in, memd_code and a caller-owned
// memd_error out, and no C++ exception past the boundary.

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "memd/memd.h"

// The error object of memd.h: a code and the message the caller reads until
// memd_error_free. Not thread-safe (the caller owns it).
struct memd_error {
  memd_code code = MEMD_OK;
  std::string message;
};

namespace memd::c_api {

// Returns the status's code, and gives *error a new memd_error for a failed
// status when error is not NULL. Never throws: when the error object cannot
// be allocated, *error is a static one saying so (memd_error_free knows it).
memd_code Report(const absl::Status& status, memd_error** error) noexcept;

absl::Status StatusOfCurrentException() noexcept;

// Runs `body` (returning absl::Status) and reports its status; an exception
// becomes INTERNAL, or RESOURCE_EXHAUSTED for std::bad_alloc.
template <typename Body>
memd_code Guarded(memd_error** error, Body&& body) noexcept {
  absl::Status status;
  try {
    status = std::forward<Body>(body)();
  } catch (...) {
    status = StatusOfCurrentException();
  }
  return Report(status, error);
}

// INVALID_ARGUMENT unless `pointer` is set; `what` names the argument.
absl::Status Required(const void* pointer, const char* what);

}  // namespace memd::c_api
