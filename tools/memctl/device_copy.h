#pragma once

// Copies between memctl's host memory and device buffers, through the CUDA
// driver (loaded at run time, as libmemd does).

#include <cstddef>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cuda/driver.h"
#include "memd/client.h"

namespace memd::memctl {

// Makes memctl's CUDA device `ordinal` (Client::CudaDevice translates memd's
// "device:N") primary context current on this thread for the
// rest of the program (memctl does one thing and exits). Errors: UNAVAILABLE
// (no CUDA driver here), the driver's errors naming the call.
absl::StatusOr<std::shared_ptr<const cuda::Driver>> UseDevice(int ordinal);

absl::Status CopyToDevice(const cuda::Driver& driver, DevicePointer destination,
                          std::span<const std::byte> source);
absl::Status CopyFromDevice(const cuda::Driver& driver, std::span<std::byte> destination,
                            DevicePointer source);

}  // namespace memd::memctl
