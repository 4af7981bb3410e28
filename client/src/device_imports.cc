#include "client/src/device_imports.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/cuda/scoped_context.h"
#include "common/status_macros.h"

namespace memd::internal {
namespace {

// The calling thread must have a context on `device`: CUDA imports into the
// current context, and a buffer is usable only from its own device.
absl::StatusOr<CUcontext> CurrentContextOn(const cuda::Driver& driver, int device) {
  const cuda::DriverApi& api = driver.api();
  CUcontext context = nullptr;
  MEMD_RETURN_IF_ERROR(driver.Check(api.CtxGetCurrent(&context), "cuCtxGetCurrent"));
  if (context == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA context is current on this thread: make one on device ", device,
        " current (cudaSetDevice(", device, "), or cuCtxSetCurrent) before opening "
        "a device buffer"));
  }
  CUdevice current = 0, wanted = 0;
  MEMD_RETURN_IF_ERROR(driver.Check(api.CtxGetDevice(&current), "cuCtxGetDevice"));
  MEMD_RETURN_IF_ERROR(driver.Check(api.DeviceGet(&wanted, device), "cuDeviceGet", device));
  if (current != wanted) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the current CUDA context is on device ", current, "; the buffer lives on "
        "device ", device, ": make a context on device ", device, " current first"));
  }
  return context;
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
  if (base == 0) return;
  const cuda::DriverApi& api = driver->api();
  if (ipc) {
    // Closing needs the context it was opened in, whichever thread ends it.
    cuda::ScopedContext current(*driver, context);
    api.IpcCloseMemHandle(base);
    return;
  }
  api.MemUnmap(base, bytes);
  api.MemAddressFree(base, bytes);
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
  absl::MutexLock lock(&mu_);
  return OrdinalOfLocked(uuid);
}

absl::StatusOr<std::string> DeviceImports::UuidOf(int ordinal) {
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(const std::vector<std::string>* uuids, UuidsLocked());
  if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= uuids->size()) {
    return absl::NotFoundError(absl::StrCat("this process has no CUDA device ", ordinal,
                                            " (it sees ", uuids->size(), ")"));
  }
  return (*uuids)[ordinal];
}

absl::StatusOr<std::shared_ptr<DeviceImport>> DeviceImports::Import(
    std::uint64_t generation, DeviceHandle handle) {
  absl::MutexLock lock(&mu_);
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::Driver> driver, DriverLocked());
  if (!handle.device_uuid.empty()) {
    absl::StatusOr<int> local = OrdinalOfLocked(handle.device_uuid);
    if (absl::IsNotFound(local.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the buffer lives on memd's device:", handle.device, ", and ",
          local.status().message()));
    }
    MEMD_RETURN_IF_ERROR(local.status());
    handle.device = *local;  // From here on, this process's numbering.
  }
  MEMD_ASSIGN_OR_RETURN(CUcontext context, CurrentContextOn(*driver, handle.device));
  std::weak_ptr<DeviceImport>& slot = imports_[{generation, handle.segment_id}];
  if (std::shared_ptr<DeviceImport> shared = slot.lock()) return shared;
  auto import = std::make_shared<CudaImport>();
  import->driver = driver;
  import->context = context;
  import->device = handle.device;
  import->ipc = handle.ipc;
  absl::Status status = handle.ipc ? OpenIpc(*driver, handle, *import)
                                   : MapVmm(*driver, handle, *import);
  if (!status.ok()) {
    imports_.erase({generation, handle.segment_id});
    return status;
  }
  slot = import;
  return import;
}

}  // namespace memd::internal
