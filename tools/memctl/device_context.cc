#include "tools/memctl/device_context.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "common/location.h"
#include "common/status_macros.h"

namespace memd::memctl {
namespace {

// Loaded once and never unloaded: the contexts made current here, and
// libmemd's imports, live in this one load of the library until exit.
absl::StatusOr<std::shared_ptr<const cuda::Driver>> LoadDriverOnce() {
  static absl::StatusOr<std::shared_ptr<const cuda::Driver>>* const driver =
      new absl::StatusOr<std::shared_ptr<const cuda::Driver>>(cuda::Driver::Load());
  return *driver;
}

}  // namespace

absl::Status UseDeviceOf(Client& client, std::string_view location) {
  absl::StatusOr<Location> parsed = Location::Parse(location);
  if (!parsed.ok() || parsed->kind != Location::Kind::kDevice) return absl::OkStatus();
  // A Level Zero buffer needs nothing current: libmemd opens it in a
  // context of its own.
  MEMD_ASSIGN_OR_RETURN(const DaemonStats stats, client.Stats());
  for (const DeviceInfo& device : stats.devices) {
    if (device.ordinal == parsed->device && device.api == "level_zero") {
      return absl::OkStatus();
    }
  }
  // memctl's CUDA may number the GPUs otherwise than memd's.
  MEMD_ASSIGN_OR_RETURN(const int ordinal, client.CudaDevice(location));
  auto loaded = LoadDriverOnce();
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
  return absl::OkStatus();
}

}  // namespace memd::memctl
