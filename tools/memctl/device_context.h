#pragma once

// The one thing memctl still needs the CUDA driver for: libmemd imports
// every device buffer it leases into the process, which needs a current
// context on the buffer's GPU. memctl moves no device bytes itself (the
// daemon's transfer engine does), but a Client::Copy operand is a lease.

#include <string_view>

#include "absl/status/status.h"
#include "memd/client.h"

namespace memd::memctl {

// For `location` "device:N" on a CUDA GPU: loads the CUDA driver and makes
// this process's CUDA device for memd's device:N (Client::CudaDevice
// translates) current on this thread, with its primary context retained
// until the program ends (memctl does one thing and exits). Nothing for
// host locations, Level Zero GPUs, or text that is no location (Create
// reports that). Errors: UNAVAILABLE (no
// CUDA driver here), NOT_FOUND (this process does not see the GPU), the
// driver's errors naming the call.
absl::Status UseDeviceOf(Client& client, std::string_view location);

}  // namespace memd::memctl
