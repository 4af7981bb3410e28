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
  // The Level Zero loader; empty: $MEMD_ZE_LOADER, else libze_loader.so.1.
  std::string level_zero_loader;
};

// The backend chosen by `options`, and why (for the log). "auto" serves
// the CUDA GPUs when a CUDA driver loads and sees one, and the Level Zero
// GPUs when the loader finds any (numbered after CUDA's: device:k...);
// both kinds when both are there, host memory only when neither is. `why`
// says what was not found and why. Errors: INVALID_ARGUMENT (unknown kind
// or cuda_handles), FAILED_PRECONDITION (the asked-for backend cannot run
// here, and why).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       std::string* why = nullptr);

}  // namespace memd::backend
