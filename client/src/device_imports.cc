#include "client/src/device_imports.h"

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda/scoped_context.h"
#include "common/status_macros.h"

namespace memd::internal {
namespace {

// How an error names the buffer's GPU: memd's location, and this process's
// CUDA ordinal of it once known (-1: not yet).
std::string Where(int memd_device, int ordinal) {
  if (ordinal < 0) return absl::StrCat("memd's device:", memd_device);
  return absl::StrCat("memd's device:", memd_device, " (CUDA device ", ordinal,
                      " in this process)");
}

// The calling thread's current context, which must be on `ordinal` (CUDA
// imports into the current context, and a buffer is usable only from its
// own device); nullptr when it has none.
absl::StatusOr<CUcontext> CurrentContextOn(const cuda::Driver& driver, int ordinal) {
  const cuda::DriverApi& api = driver.api();
  CUcontext context = nullptr;
  MEMD_RETURN_IF_ERROR(driver.Check(api.CtxGetCurrent(&context), "cuCtxGetCurrent"));
  if (context == nullptr) return nullptr;
  CUdevice current = 0, wanted = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(api.CtxGetDevice(&current), "cuCtxGetDevice"));
  MEMD_RETURN_IF_ERROR(driver.Check(api.DeviceGet(&wanted, ordinal), "cuDeviceGet", ordinal));
  if (current != wanted) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this thread's current CUDA context is on CUDA device ", current,
        ": make a context on CUDA device ", ordinal, " current (cudaSetDevice(", ordinal,
        ")), or open the buffer on a thread with no current context (libmemd then "
        "uses device ", ordinal, "'s primary context)"));
  }
  return context;
}

// Retains device `ordinal`'s primary context for an import made on a thread
// without a current context; the import releases it.
absl::StatusOr<CUdevice> RetainPrimary(const cuda::Driver& driver, int ordinal,
                                       CUcontext* context) {
  const cuda::DriverApi& api = driver.api();
  CUdevice device = 0;
  absl::Status status = driver.Check(api.DeviceGet(&device, ordinal), "cuDeviceGet", ordinal);
  if (status.ok()) {
    status = driver.Check(api.DevicePrimaryCtxRetain(context, device),
                          "cuDevicePrimaryCtxRetain", ordinal);
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(
        "this thread has no current CUDA context, and libmemd could not retain the "
        "device's primary context instead: ", status.message()));
  }
  return device;
}

absl::Status MapVmm(const cuda::Driver& driver, DeviceHandle& handle,
                    CudaImport& import) {
  const cuda::DriverApi& api = driver.api();
  const int device = handle.device;
  CUmemGenericAllocationHandle allocation = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(
      api.MemImportFromShareableHandle(
          &allocation, reinterpret_cast<void*>(static_cast<std::uintptr_t>(handle.fd.get())),
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
      "cuMemImportFromShareableHandle", device));
  // The mapping holds the memory from here on; the handle goes either way.
  struct ReleaseHandle {
    const cuda::DriverApi& api;
    CUmemGenericAllocationHandle allocation;
    ~ReleaseHandle() { api.MemRelease(allocation); }
  } release{api, allocation};
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(
      api.MemGetAllocationGranularity(&granularity, &prop,
                                      CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity", device));
  CUdeviceptr base = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(
      api.MemAddressReserve(&base, handle.segment_bytes, granularity, 0, 0),
      "cuMemAddressReserve", device));
  absl::Status mapped = driver.Check(
      api.MemMap(base, handle.segment_bytes, 0, allocation, 0), "cuMemMap", device);
  if (!mapped.ok()) {
    api.MemAddressFree(base, handle.segment_bytes);
    return mapped;
  }
  import.base = base;
  import.bytes = handle.segment_bytes;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = handle.writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                 : CU_MEM_ACCESS_FLAGS_PROT_READ;
  return driver.Check(api.MemSetAccess(base, handle.segment_bytes, &access, 1),
                      "cuMemSetAccess", device);
}

absl::Status OpenIpc(const cuda::Driver& driver, const DeviceHandle& handle,
                     CudaImport& import) {
  CUipcMemHandle ipc{};
  if (handle.ipc_handle.size() != sizeof(ipc.reserved)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the daemon sent a CUDA IPC handle of ", handle.ipc_handle.size(),
        " bytes; it should be ", sizeof(ipc.reserved)));
  }
  std::memcpy(ipc.reserved, handle.ipc_handle.data(), sizeof(ipc.reserved));
  CUdeviceptr base = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(
      driver.api().IpcOpenMemHandle(&base, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
      "cuIpcOpenMemHandle", handle.device));
  import.base = base;
  import.bytes = handle.segment_bytes;
  return absl::OkStatus();
}

}  // namespace

CudaImport::~CudaImport() {
  if (driver == nullptr) return;
  const cuda::DriverApi& api = driver->api();
  if (base != 0 && ipc) {
    // Closing needs the context it was opened in, whichever thread ends it.
    cuda::ScopedContext current(*driver, context);
    api.IpcCloseMemHandle(base);
  } else if (base != 0) {
    api.MemUnmap(base, bytes);
    api.MemAddressFree(base, bytes);
  }
  // After the mapping: the last release of a primary context resets it.
  if (retained_primary.has_value()) api.DevicePrimaryCtxRelease(*retained_primary);
}

absl::StatusOr<std::shared_ptr<const cuda::Driver>> DeviceImports::DriverLocked() {
  if (driver_ == nullptr) {
    auto loaded = cuda::Driver::Load();
    if (!loaded.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "this buffer lives in GPU memory and this process has no usable CUDA "
          "driver: ", loaded.status().message()));
    }
    driver_ = *std::move(loaded);
  }
  return driver_;
}

absl::StatusOr<const std::vector<std::string>*> DeviceImports::UuidsLocked() {
  if (!uuids_.has_value()) {
    MEMD_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::Driver> driver, DriverLocked());
    int count = 0;
    MEMD_RETURN_IF_ERROR(driver->Check(driver->api().DeviceGetCount(&count), "cuDeviceGetCount"));
    std::vector<std::string> uuids;
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      MEMD_ASSIGN_OR_RETURN(std::string uuid, driver->DeviceUuid(ordinal));
      uuids.push_back(std::move(uuid));
    }
    uuids_ = std::move(uuids);
  }
  return &*uuids_;
}

absl::StatusOr<int> DeviceImports::OrdinalOfLocked(const std::string& uuid) {
  MEMD_ASSIGN_OR_RETURN(const std::vector<std::string>* uuids, UuidsLocked());
  for (std::size_t ordinal = 0; ordinal < uuids->size(); ++ordinal) {
    if ((*uuids)[ordinal] == uuid) return static_cast<int>(ordinal);
  }
  return absl::NotFoundError(absl::StrCat(
      "this process does not see GPU ", uuid, " (it sees ", uuids->size(),
      " GPUs; CUDA_VISIBLE_DEVICES or the container's GPUs leave it out)"));
}

absl::StatusOr<int> DeviceImports::OrdinalOf(const std::string& uuid) {
  PlainMutexLock lock(&mu_);
  return OrdinalOfLocked(uuid);
}

absl::StatusOr<std::string> DeviceImports::UuidOf(int ordinal) {
  PlainMutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(const std::vector<std::string>* uuids, UuidsLocked());
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= uuids->size()) {
    return absl::NotFoundError(absl::StrCat("this process has no CUDA device ", ordinal,
                                            " (it sees ", uuids->size(), ")"));
  }
  return (*uuids)[ordinal];
}

absl::StatusOr<std::shared_ptr<DeviceImport>> DeviceImports::Import(
    std::uint64_t generation, DeviceHandle handle) {
  const int memd_device = handle.device;
  // Every error names the buffer's GPU, as memd and as this process call it.
  auto cannot = [memd_device](const absl::Status& status, int ordinal) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot open the buffer on ", Where(memd_device, ordinal),
                                     ": ", status.message()));
  };
  PlainMutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<const cuda::Driver>> loaded = DriverLocked();
  if (!loaded.ok()) return cannot(loaded.status(), -1);
  const std::shared_ptr<const cuda::Driver> driver = *std::move(loaded);
  if (!handle.device_uuid.empty()) {
    absl::StatusOr<int> local = OrdinalOfLocked(handle.device_uuid);
    if (absl::IsNotFound(local.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the buffer lives on ", Where(memd_device, -1), ", and ", local.status().message()));
    }
    if (!local.ok()) return cannot(local.status(), -1);
    handle.device = *local;  // From here on, this process's numbering.
  }
  const int ordinal = handle.device;
  absl::StatusOr<CUcontext> current = CurrentContextOn(*driver, ordinal);
  if (!current.ok()) return cannot(current.status(), ordinal);
  const std::pair<std::uint64_t, std::uint64_t> key{generation, handle.segment_id};
  if (auto found = imports_.find(key); found != imports_.end()) {
    if (std::shared_ptr<DeviceImport> shared = found->second.lock()) return shared;
  }
  if (!handle.ipc && !handle.fd) {
    return absl::InternalError(absl::StrCat(
        "memd sent no descriptor for segment ", handle.segment_id,
        ", which this process does not import"));
  }
  auto import = std::make_shared<CudaImport>();
  import->driver = driver;
  import->device = ordinal;
  import->ipc = handle.ipc;
  // No current context: the device's primary context, the one the CUDA
  // runtime (and so PyTorch, CuPy) uses, current only while importing.
  // Leaving it current would change the thread's device for the runtime
  // (cudaGetDevice follows the current context) behind the caller's back.
  std::optional<cuda::ScopedContext> importing;
  if (*current != nullptr) {
    import->context = *current;
  } else {
    absl::StatusOr<CUdevice> retained = RetainPrimary(*driver, ordinal, &import->context);
    if (!retained.ok()) return cannot(retained.status(), ordinal);
    import->retained_primary = *retained;
    importing.emplace(*driver, import->context);
    if (!importing->status().ok()) return cannot(importing->status(), ordinal);
  }
  absl::Status status = handle.ipc ? OpenIpc(*driver, handle, *import)
                                   : MapVmm(*driver, handle, *import);
  importing.reset();  // Back to no current context, before a failed import closes.
  if (!status.ok()) return cannot(status, ordinal);
  imports_[key] = import;
  return import;
}

}  // namespace memd::internal
