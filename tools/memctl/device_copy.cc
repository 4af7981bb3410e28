#include "tools/memctl/device_copy.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::memctl {

absl::StatusOr<std::shared_ptr<const cuda::Driver>> UseDevice(int ordinal) {
  auto loaded = cuda::Driver::Load();
  if (!loaded.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "device buffers need the CUDA driver: ", loaded.status().message()));
  }
  std::shared_ptr<const cuda::Driver> driver = *std::move(loaded);
  const cuda::DriverApi& api = driver->api();
  CUdevice device = 0;
  MEMD_RETURN_IF_ERROR(driver->Check(api.DeviceGet(&device, ordinal), "cuDeviceGet", ordinal));
  // Retained for the life of the process: released when it exits.
  CUcontext context = nullptr;
  MEMD_RETURN_IF_ERROR(driver->Check(api.DevicePrimaryCtxRetain(&context, device),
                                "cuDevicePrimaryCtxRetain", ordinal));
  MEMD_RETURN_IF_ERROR(driver->Check(api.CtxSetCurrent(context), "cuCtxSetCurrent", ordinal));
  return driver;
}

absl::Status CopyToDevice(const cuda::Driver& driver, DevicePointer destination,
                          std::span<const std::byte> source) {
  return driver.Check(
      driver.api().MemcpyHtoD(destination, source.data(), source.size()), "cuMemcpyHtoD");
}

absl::Status CopyFromDevice(const cuda::Driver& driver, std::span<std::byte> destination,
                            DevicePointer source) {
  return driver.Check(
      driver.api().MemcpyDtoH(destination.data(), source, destination.size()),
      "cuMemcpyDtoH");
}

}  // namespace memd::memctl
