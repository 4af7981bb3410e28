// memd FAKE CUDA driver (a test double): devices, their primary contexts, and
// each thread's current context.

#include <cuda.h>
#include <sys/mman.h>

#include <cstdio>
#include <iterator>
#include <mutex>

#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

// The calling thread's current context (cuCtxSetCurrent). A plain pointer:
// a thread_local with a destructor would pin the library in memory. Static
// TLS (initial-exec): dynamic TLS of a library dlclosed before exit made
// LeakSanitizer's exit-time tracer crash ("Tracer caught signal 11") in
// clients that had loaded the fake, in most sanitizer runs of the CUDA
// multi-process tests.
__attribute__((tls_model("initial-exec"))) thread_local CUctx_st* t_current = nullptr;

}  // namespace

// ---- Devices ----

CUresult FakeDriver::DeviceGet(CUdevice* device, int ordinal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::DeviceGetCount(int* count) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(devices_.size());
  return CUDA_SUCCESS;
}

CUresult FakeDriver::DeviceGetName(char* name, int length, CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "memd fake GPU %d",
                devices_[static_cast<size_t>(device)]->physical);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::DeviceGetUuid(CUuuid* uuid, CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  // The physical device's: the same GPU has the same UUID in every process.
  *uuid = PhysicalUuid(devices_[static_cast<size_t>(device)]->physical);
  return CUDA_SUCCESS;
}

CUresult FakeDriver::DeviceTotalMem(size_t* bytes, CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = memory_;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      *value = vmm_ ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:  // Where the device sits: physical.
      *value = devices_[static_cast<size_t>(device)]->physical;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
      *value = 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      *value = 1;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // Not modelled by the fake.
  }
}

// This process's ordinal for a physical device; -1 when it does not see it.
int FakeDriver::LocalOrdinal(int physical) const {
  for (size_t ordinal = 0; ordinal < devices_.size(); ++ordinal) {
    if (devices_[ordinal]->physical == physical) return static_cast<int>(ordinal);
  }
  return -1;
}

// ---- Contexts ----

CUresult FakeDriver::PrimaryCtxRetain(CUcontext* context, CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st& primary = devices_[static_cast<size_t>(device)]->context;
  ++primary.retains;
  *context = &primary;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::PrimaryCtxRelease(CUdevice device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st& primary = devices_[static_cast<size_t>(device)]->context;
  if (primary.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--primary.retains == 0) ResetContext(&primary);
  return CUDA_SUCCESS;
}

// Flags are always 0 (CU_CTX_SCHED_AUTO: the fake has no
// cuDevicePrimaryCtxSetFlags); active while retained.
CUresult FakeDriver::PrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = devices_[static_cast<size_t>(device)]->context.retains > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::CtxSetCurrent(CUcontext context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (context != nullptr && !KnownContext(context)) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = context;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::CtxGetCurrent(CUcontext* context) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = t_current;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::CtxGetDevice(CUdevice* device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = context->device;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  SweepReleased();
  const Device& device = *devices_[static_cast<size_t>(context->device)];
  *free_bytes = memory_ - device.used;
  *total_bytes = memory_;
  return CUDA_SUCCESS;
}

bool FakeDriver::KnownContext(CUcontext context) const {
  for (const auto& device : devices_) {
    if (&device->context == context) return true;
  }
  return false;
}

// The calling thread's current context, which must be active.
CUresult FakeDriver::Current(CUctx_st** context) const {
  if (t_current == nullptr || !KnownContext(t_current)) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_current->retains == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (CUresult sticky = devices_[static_cast<size_t>(t_current->device)]->sticky;
      sticky != CUDA_SUCCESS) {
    return sticky;
  }
  *context = t_current;
  return CUDA_SUCCESS;
}

// The last release of a primary context resets it: as in CUDA, the memory
// it allocated, opened or registered goes with it.
void FakeDriver::ResetContext(CUctx_st* context) {
  for (auto it = legacy_.begin(); it != legacy_.end();) {
    auto next = std::next(it);
    if (it->second.context == context) FreeLegacy(it);
    it = next;
  }
  for (auto it = ipc_.begin(); it != ipc_.end();) {
    if (it->second.context == context) {
      munmap(AsPointer(it->first), it->second.size);
      it = ipc_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = host_.begin(); it != host_.end();) {
    if (it->second.context != context) {
      ++it;
      continue;
    }
    if (it->second.allocated) munmap(AsPointer(it->first), it->second.mapped);
    it = host_.erase(it);
  }
}

}  // namespace memd::fake_cuda
