#pragma once

// How a ze_result_t from the copy side of a Level Zero driver becomes a
// status whose code tells the transfer engine what to do next
// (copy_device.h): the same codes the CUDA copy side gives.

#include <string_view>

#include "absl/status/status.h"
#include "common/ze/driver.h"
#include "daemon/backend/copy_call.h"

namespace memd::backend {

// Errors after which the device serves nothing until the process restarts:
// a lost device, or one that needs a reset memd cannot do.
bool IsStickyZeError(ze_result_t result);

// OK for ZE_RESULT_SUCCESS. Else the loader's message (call, ze_result_t
// name and number, device), coded: sticky -> INTERNAL; bad arguments,
// pointers, sizes, alignment or enumerations -> INVALID_ARGUMENT; out of
// host or device memory, or a device not available now (uninitialised, in
// low power, ...) -> UNAVAILABLE (staging: out of memory is
// RESOURCE_EXHAUSTED); any other error surfaced by an event wait or query
// -> UNAVAILABLE; the rest INTERNAL.
absl::Status ZeCopyStatus(const ze::Loader& loader, ze_result_t result, std::string_view call,
                          int device, CopyCall kind);

}  // namespace memd::backend
