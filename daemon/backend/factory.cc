#include "daemon/backend/factory.h"

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::backend {
namespace {

absl::StatusOr<CudaHandles> ParseHandles(const std::string& text) {
  if (text == "auto") return CudaHandles::kAuto;
  if (text == "vmm_fd") return CudaHandles::kVmmFd;
  if (text == "ipc") return CudaHandles::kIpc;
  return absl::InvalidArgumentError(absl::StrCat(
      "cuda_handles '", text, "' is not one of auto, vmm_fd, ipc"));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCuda(const BackendOptions& options) {
  auto handles = ParseHandles(options.cuda_handles);
  if (!handles.ok()) return handles.status();
  auto driver = cuda::Driver::Load(options.cuda_driver);
  if (!driver.ok()) return driver.status();
  auto cuda = CudaBackend::Create(*std::move(driver), *handles);
  if (!cuda.ok()) return cuda.status();
  return std::unique_ptr<Backend>(std::move(*cuda));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       std::string* why) {
  const std::string& kind = options.kind;
  if (kind == "host") return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  if (kind == "cuda") {
    auto cuda = CreateCuda(options);
    if (!cuda.ok()) {
      return absl::Status(absl::IsInvalidArgument(cuda.status())
                              ? absl::StatusCode::kInvalidArgument
                              : absl::StatusCode::kFailedPrecondition,
                          absl::StrCat("--backend cuda: ", cuda.status().message()));
    }
    return cuda;
  }
  if (kind == "auto") {
    auto cuda = CreateCuda(options);
    if (cuda.ok() || absl::IsInvalidArgument(cuda.status())) return cuda;
    if (why != nullptr) {
      *why = absl::StrCat("no CUDA backend (", cuda.status().message(),
                          "); serving host memory only");
    }
    return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  }
  if (kind == "level_zero") {
    return absl::FailedPreconditionError(
        "backend 'level_zero' is not part of this version of memd; use --backend "
        "host, cuda or auto");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend '", kind, "'; expected auto, host, cuda or level_zero"));
}

}  // namespace memd::backend
