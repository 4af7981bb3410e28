#include "daemon/backend/cuda/copy_errors.h"

namespace memd::backend {

bool IsStickyCudaError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

namespace {

// Worth retrying whatever the call: the driver or device is short of
// something now.
bool IsTransient(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_MPS_CONNECTION_FAILED:
    case CUDA_ERROR_MPS_RPC_FAILURE:
    case CUDA_ERROR_MPS_SERVER_NOT_READY:
    case CUDA_ERROR_MPS_MAX_CLIENTS_REACHED:
    case CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED:
    case CUDA_ERROR_TIMEOUT:
      return true;
    default:
      return false;
  }
}

bool IsBadArgument(CUresult result) {
  return result == CUDA_ERROR_INVALID_VALUE || result == CUDA_ERROR_INVALID_HANDLE ||
         result == CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace

absl::Status CopyStatus(const cuda::Driver& driver, CUresult result, std::string_view call,
                        int device, CopyCall kind) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const std::string message(driver.Check(result, call, device).message());
  if (IsStickyCudaError(result)) {
    return absl::InternalError(
        message + "; the device's context is broken until memd restarts");
  }
  if (kind == CopyCall::kStaging && result == CUDA_ERROR_OUT_OF_MEMORY) {
    return absl::ResourceExhaustedError(message);
  }
  if (IsBadArgument(result)) return absl::InvalidArgumentError(message);
  if (IsTransient(result) || kind == CopyCall::kSurface) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

}  // namespace memd::backend
