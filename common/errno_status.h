#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace memd {

// A status for a failed system call: the code follows what the caller can do
// about `error` (ENOMEM/ENOSPC: RESOURCE_EXHAUSTED, EACCES/EPERM:
// PERMISSION_DENIED, ENOENT: NOT_FOUND, EINVAL: INVALID_ARGUMENT, EAGAIN:
// UNAVAILABLE, else INTERNAL); the message names the call and strerror.
absl::Status ErrnoStatus(std::string_view call, int error);

}  // namespace memd
