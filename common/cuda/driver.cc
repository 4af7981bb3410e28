#include "common/cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace memd::cuda {

std::string Driver::DefaultPath() {
  const char* path = std::getenv("MEMD_CUDA_DRIVER");
  return path != nullptr && path[0] != '\0' ? path : "libcuda.so.1";
}

absl::StatusOr<std::shared_ptr<Driver>> Driver::Load(const std::string& requested) {
  const std::string path = requested.empty() ? DefaultPath() : requested;
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    return absl::UnavailableError(absl::StrCat(
        "no CUDA driver: cannot load ", path, ": ", error ? error : "unknown error"));
  }
  std::shared_ptr<Driver> driver(new Driver(library, path));
#define MEMD_CUDA_RESOLVE(field, symbol, signature)                            \
  driver->api_.field =                                                         \
      reinterpret_cast<std::add_pointer_t<signature>>(::dlsym(library, #symbol)); \
  if (driver->api_.field == nullptr) {                                         \
    return absl::FailedPreconditionError(absl::StrCat(                         \
        "the CUDA driver ", path, " has no ", #symbol,                         \
        "; memd needs a newer driver"));                                       \
  }
  MEMD_CUDA_DRIVER_ENTRY_POINTS(MEMD_CUDA_RESOLVE)
#undef MEMD_CUDA_RESOLVE
  const CUresult initialised = driver->api_.Init(0);
  if (initialised != CUDA_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        "no usable CUDA: ", driver->Check(initialised, "cuInit").message()));
  }
  driver->api_.DriverGetVersion(&driver->version_);
  return driver;
}

Driver::~Driver() { ::dlclose(library_); }

absl::Status Driver::Check(CUresult result, std::string_view call, int device) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* description = nullptr;
  if (api_.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    name = "unknown CUresult";
  }
  if (api_.GetErrorString(result, &description) != CUDA_SUCCESS ||
      description == nullptr) {
    description = "";
  }
  std::string message = absl::StrCat(
      absl::string_view(call.data(), call.size()), " failed",
      device >= 0 ? absl::StrCat(" on device ", device) : "", ": ", name, " (",
      static_cast<int>(result), ")", description[0] ? ": " : "", description);
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(message);
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
    case CUDA_ERROR_ALREADY_MAPPED:
      return absl::FailedPreconditionError(message);
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE:
      return absl::InvalidArgumentError(message);
    case CUDA_ERROR_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::string> Driver::DeviceUuid(int ordinal) const {
  CUdevice device = 0;
  MEMD_RETURN_IF_ERROR(Check(api_.DeviceGet(&device, ordinal), "cuDeviceGet", ordinal));
  CUuuid uuid{};
  MEMD_RETURN_IF_ERROR(Check(api_.DeviceGetUuid(&uuid, device), "cuDeviceGetUuid", ordinal));
  return FormatUuid(uuid);
}

std::string FormatUuid(const CUuuid& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  return absl::StrFormat(
      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
      b[12], b[13], b[14], b[15]);
}

}  // namespace memd::cuda
