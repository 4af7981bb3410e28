#include "common/ze/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace memd::ze {

std::string ResultName(ze_result_t result) {
  switch (result) {
#define MEMD_ZE_RESULT(name) \
  case name:                 \
    return #name;
    MEMD_ZE_RESULT(ZE_RESULT_SUCCESS)
    MEMD_ZE_RESULT(ZE_RESULT_NOT_READY)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_LOST)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE)
    MEMD_ZE_RESULT(ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX)
    MEMD_ZE_RESULT(ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE)
    MEMD_ZE_RESULT(ZE_RESULT_EXP_ERROR_REMOTE_DEVICE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_NOT_AVAILABLE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE)
    MEMD_ZE_RESULT(ZE_RESULT_WARNING_DROPPED_DATA)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNINITIALIZED)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SIZE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_FUNCTION_NAME)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_OVERLAPPING_REGIONS)
    MEMD_ZE_RESULT(ZE_RESULT_WARNING_ACTION_REQUIRED)
    MEMD_ZE_RESULT(ZE_RESULT_ERROR_UNKNOWN)
#undef MEMD_ZE_RESULT
    default:
      return absl::StrFormat("ze_result_t 0x%x", static_cast<unsigned>(result));
  }
}

std::string FormatUuid(const ze_device_uuid_t& uuid) {
  const unsigned char* b = uuid.id;
  return absl::StrFormat(
      "ZE-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
      b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
      b[14], b[15]);
}

std::string Loader::DefaultPath() {
  const char* path = std::getenv("MEMD_ZE_LOADER");
  return path != nullptr && path[0] != '\0' ? path : "libze_loader.so.1";
}

absl::StatusOr<std::shared_ptr<Loader>> Loader::Load(const std::string& requested) {
  const std::string path = requested.empty() ? DefaultPath() : requested;
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    return absl::UnavailableError(absl::StrCat("no Level Zero loader: cannot load ", path,
                                               ": ", error ? error : "unknown error"));
  }
  std::shared_ptr<Loader> loader(new Loader(library, path));
#define MEMD_ZE_RESOLVE(field, symbol, signature)                                     \
  loader->api_.field =                                                                \
      reinterpret_cast<std::add_pointer_t<signature>>(::dlsym(library, #symbol));     \
  if (loader->api_.field == nullptr) {                                                \
    return absl::FailedPreconditionError(absl::StrCat(                                \
        "the Level Zero loader ", path, " has no ", #symbol, "; memd needs loader 1.8 " \
        "or newer"));                                                                 \
  }
  MEMD_ZE_ENTRY_POINTS(MEMD_ZE_RESOLVE)
#undef MEMD_ZE_RESOLVE
  loader->api_.MemPutIpcHandle = reinterpret_cast<decltype(loader->api_.MemPutIpcHandle)>(
      ::dlsym(library, "zeMemPutIpcHandle"));
  const ze_result_t initialised = loader->api_.Init(ZE_INIT_FLAG_GPU_ONLY);
  if (initialised != ZE_RESULT_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        "no usable Level Zero driver: ", loader->Check(initialised, "zeInit").message()));
  }
  MEMD_RETURN_IF_ERROR(loader->Discover());
  return loader;
}

Loader::~Loader() {
  for (ze_context_handle_t context : contexts_) api_.ContextDestroy(context);
  ::dlclose(library_);
}

absl::Status Loader::Check(ze_result_t result, std::string_view call, int device) const {
  if (result == ZE_RESULT_SUCCESS) return absl::OkStatus();
  std::string message = absl::StrCat(
      absl::string_view(call.data(), call.size()), " failed",
      device >= 0 ? absl::StrCat(" on device ", device) : "", ": ", ResultName(result),
      absl::StrFormat(" (0x%x)", static_cast<unsigned>(result)));
  switch (result) {
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY:
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
      return absl::ResourceExhaustedError(message);
    case ZE_RESULT_ERROR_INVALID_ARGUMENT:
    case ZE_RESULT_ERROR_INVALID_NULL_HANDLE:
    case ZE_RESULT_ERROR_INVALID_NULL_POINTER:
    case ZE_RESULT_ERROR_INVALID_SIZE:
    case ZE_RESULT_ERROR_UNSUPPORTED_SIZE:
    case ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT:
    case ZE_RESULT_ERROR_INVALID_ENUMERATION:
    case ZE_RESULT_ERROR_OVERLAPPING_REGIONS:
      return absl::InvalidArgumentError(message);
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
    case ZE_RESULT_ERROR_UNSUPPORTED_VERSION:
    case ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION:
      return absl::UnimplementedError(message);
    case ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE:
    case ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS:
      return absl::FailedPreconditionError(message);
    case ZE_RESULT_ERROR_UNINITIALIZED:
    case ZE_RESULT_ERROR_DEVICE_LOST:
    case ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET:
    case ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE:
    case ZE_RESULT_ERROR_NOT_AVAILABLE:
    case ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

namespace {

std::string PciAddress(const LoaderApi& api, ze_device_handle_t device) {
  ze_pci_ext_properties_t pci{};
  pci.stype = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
  if (api.DevicePciGetPropertiesExt(device, &pci) != ZE_RESULT_SUCCESS) return "";
  return absl::StrFormat("%04x:%02x:%02x.%x", pci.address.domain, pci.address.bus,
                         pci.address.device, pci.address.function);
}

// The device's memory: the sum of its memory properties' sizes.
absl::StatusOr<std::uint64_t> MemoryBytes(const Loader& loader, ze_device_handle_t device,
                                          int index) {
  uint32_t count = 0;
  MEMD_RETURN_IF_ERROR(loader.Check(
      loader.api().DeviceGetMemoryProperties(device, &count, nullptr),
      "zeDeviceGetMemoryProperties", index));
  std::vector<ze_device_memory_properties_t> memories(count);
  for (auto& memory : memories) memory.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
  MEMD_RETURN_IF_ERROR(loader.Check(
      loader.api().DeviceGetMemoryProperties(device, &count, memories.data()),
      "zeDeviceGetMemoryProperties", index));
  std::uint64_t total = 0;
  for (uint32_t i = 0; i < count && i < memories.size(); ++i) total += memories[i].totalSize;
  return total;
}

}  // namespace

absl::Status Loader::Discover() {
  uint32_t driver_count = 0;
  MEMD_RETURN_IF_ERROR(Check(api_.DriverGet(&driver_count, nullptr), "zeDriverGet"));
  std::vector<ze_driver_handle_t> drivers(driver_count);
  MEMD_RETURN_IF_ERROR(Check(api_.DriverGet(&driver_count, drivers.data()), "zeDriverGet"));
  drivers.resize(driver_count);
  for (ze_driver_handle_t driver : drivers) {
    ze_driver_ipc_properties_t ipc{};
    ipc.stype = ZE_STRUCTURE_TYPE_DRIVER_IPC_PROPERTIES;
    MEMD_RETURN_IF_ERROR(
        Check(api_.DriverGetIpcProperties(driver, &ipc), "zeDriverGetIpcProperties"));
    uint32_t device_count = 0;
    MEMD_RETURN_IF_ERROR(Check(api_.DeviceGet(driver, &device_count, nullptr), "zeDeviceGet"));
    std::vector<ze_device_handle_t> devices(device_count);
    MEMD_RETURN_IF_ERROR(
        Check(api_.DeviceGet(driver, &device_count, devices.data()), "zeDeviceGet"));
    devices.resize(device_count);
    ze_context_handle_t context = nullptr;
    for (ze_device_handle_t device : devices) {
      const int index = static_cast<int>(gpus_.size());
      ze_device_properties_t properties{};
      properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      MEMD_RETURN_IF_ERROR(
          Check(api_.DeviceGetProperties(device, &properties), "zeDeviceGetProperties", index));
      if (properties.type != ZE_DEVICE_TYPE_GPU) continue;
      if (context == nullptr) {
        ze_context_desc_t desc{};
        desc.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC;
        MEMD_RETURN_IF_ERROR(Check(api_.ContextCreate(driver, &desc, &context), "zeContextCreate"));
        contexts_.push_back(context);  // Destroyed with the loader from here on.
      }
      Gpu gpu{driver, device, context};
      gpu.uuid = FormatUuid(properties.uuid);
      gpu.name = std::string(properties.name, strnlen(properties.name, sizeof(properties.name)));
      gpu.pci_address = PciAddress(api_, device);
      MEMD_ASSIGN_OR_RETURN(gpu.memory_bytes, MemoryBytes(*this, device, index));
      gpu.ipc = (ipc.flags & ZE_IPC_PROPERTY_FLAG_MEMORY) != 0;
      gpus_.push_back(std::move(gpu));
    }
  }
  return absl::OkStatus();
}

}  // namespace memd::ze
