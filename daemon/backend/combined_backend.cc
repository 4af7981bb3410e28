#include "daemon/backend/combined_backend.h"

#include <algorithm>

#include "common/status_macros.h"

namespace memd::backend {

std::vector<Location> CombinedBackend::locations() const {
  std::vector<Location> locations = cuda_->locations();
  for (const Location& location : level_zero_->locations()) {
    if (std::find(locations.begin(), locations.end(), location) == locations.end()) {
      locations.push_back(location);
    }
  }
  return locations;
}

std::vector<DeviceInfo> CombinedBackend::devices() const {
  std::vector<DeviceInfo> devices = cuda_->devices();
  for (DeviceInfo& device : level_zero_->devices()) devices.push_back(std::move(device));
  return devices;
}

Backend& CombinedBackend::Owner(const Location& location) const {
  if (location.kind == Location::Kind::kDevice &&
      location.device >= level_zero_->first_ordinal()) {
    return *level_zero_;  // Its devices, and the error for any past them.
  }
  return *cuda_;  // Host and pinned, its own devices.
}

absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CombinedBackend::CopyDevices() {
  MEMD_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<CopyDevice>> devices, cuda_->CopyDevices());
  MEMD_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<CopyDevice>> level_zero,
                        level_zero_->CopyDevices());
  for (std::unique_ptr<CopyDevice>& device : level_zero) devices.push_back(std::move(device));
  return devices;
}

}  // namespace memd::backend
