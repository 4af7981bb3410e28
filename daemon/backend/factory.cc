#include "daemon/backend/factory.h"

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "common/ze/driver.h"
#include "daemon/backend/combined_backend.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/backend/host/host_backend.h"
#include "daemon/backend/level_zero/ze_backend.h"

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

absl::StatusOr<std::unique_ptr<ZeBackend>> CreateLevelZero(const BackendOptions& options,
                                                          int first_ordinal) {
  auto loader = ze::Loader::Load(options.level_zero_loader);
  if (!loader.ok()) return loader.status();
  if ((*loader)->gpus().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Level Zero loader ", (*loader)->path(), " finds no GPU"));
  }
  return ZeBackend::Create(*std::move(loader), first_ordinal);
}

// Whichever GPU backends this node has, or host memory; `why` says what is
// missing.
absl::StatusOr<std::unique_ptr<Backend>> CreateAuto(const BackendOptions& options,
                                                    std::string* why) {
  auto cuda = CreateCuda(options);
  if (absl::IsInvalidArgument(cuda.status())) return cuda;
  const int cuda_devices = cuda.ok() ? static_cast<int>((*cuda)->devices().size()) : 0;
  auto level_zero = CreateLevelZero(options, cuda_devices);
  std::string missing;
  if (!cuda.ok()) absl::StrAppend(&missing, "no CUDA backend (", cuda.status().message(), ")");
  if (!level_zero.ok()) {
    absl::StrAppend(&missing, missing.empty() ? "" : "; ", "no Level Zero backend (",
                    level_zero.status().message(), ")");
  }
  if (why != nullptr) *why = missing;
  if (cuda.ok() && level_zero.ok()) {
    return std::unique_ptr<Backend>(
        std::make_unique<CombinedBackend>(*std::move(cuda), *std::move(level_zero)));
  }
  if (cuda.ok()) return cuda;
  if (level_zero.ok()) return std::unique_ptr<Backend>(*std::move(level_zero));
  if (why != nullptr) absl::StrAppend(why, "; serving host memory only");
  return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
}

// The asked-for backend's failure, as the factory reports it.
absl::Status Refused(const std::string& kind, const absl::Status& status) {
  return absl::Status(absl::IsInvalidArgument(status) ? absl::StatusCode::kInvalidArgument
                                                      : absl::StatusCode::kFailedPrecondition,
                      absl::StrCat("--backend ", kind, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options,
                                                       std::string* why) {
  const std::string& kind = options.kind;
  if (kind == "host") return std::unique_ptr<Backend>(std::make_unique<HostBackend>());
  if (kind == "cuda") {
    auto cuda = CreateCuda(options);
    if (!cuda.ok()) return Refused(kind, cuda.status());
    return cuda;
  }
  if (kind == "level_zero") {
    auto level_zero = CreateLevelZero(options, /*first_ordinal=*/0);
    if (!level_zero.ok()) return Refused(kind, level_zero.status());
    return std::unique_ptr<Backend>(*std::move(level_zero));
  }
  if (kind == "auto") return CreateAuto(options, why);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend '", kind, "'; expected auto, host, cuda or level_zero"));
}

}  // namespace memd::backend
