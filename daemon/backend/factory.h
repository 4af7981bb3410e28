#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"

namespace memd::backend {

struct BackendOptions {
  // "auto", "host", "cuda", "level_zero".
  std::string kind = "auto";
  // The CUDA driver library; empty: $MEMD_CUDA_DRIVER, else libcuda.so.1.
  std::string cuda_driver;
  // "auto", "vmm_fd", "ipc": how device memory is handed out.
  std::string cuda_handles = "auto";
};

// The backend chosen by `options`, and why (for the log). "auto" takes CUDA
// when a driver loads and sees a device, else host; the reason it fell back
// is in `why`. Errors: INVALID_ARGUMENT (unknown kind or cuda_handles),
// FAILED_PRECONDITION (the asked-for backend cannot run here, and why).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       std::string* why = nullptr);

}  // namespace memd::backend
