#pragma once

// How a CUresult from the copy side of the driver becomes a status whose
// code tells the transfer engine what to do next (copy_device.h).

#include <string_view>

#include "absl/status/status.h"
#include "common/cuda/driver.h"
#include "daemon/backend/copy_call.h"

namespace memd::backend {

// Errors that break the context until the process restarts (CUDA's "sticky"
// errors: illegal address, launch failure, ECC, ...).
bool IsStickyCudaError(CUresult result);

// OK for CUDA_SUCCESS. Else the driver's message (call, CUresult, device),
// coded: sticky -> INTERNAL; bad values or handles -> INVALID_ARGUMENT;
// out of memory, resources or a busy device -> UNAVAILABLE (staging: out of
// memory is RESOURCE_EXHAUSTED); any other non-sticky error surfaced by an
// event or synchronize (a copy that failed and may be retried) ->
// UNAVAILABLE; the rest INTERNAL.
absl::Status CopyStatus(const cuda::Driver& driver, CUresult result, std::string_view call,
                        int device, CopyCall kind);

}  // namespace memd::backend
