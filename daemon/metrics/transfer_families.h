#pragma once

#include <vector>

#include "daemon/metrics/daemon_families.h"

namespace memd::metrics {

// The transfer engine's families (memd_transfer_*, memd_device_healthy), in
// the order a scrape shows them, after the pools' and the broker's.
std::vector<FamilySpec> TransferFamilies();

}  // namespace memd::metrics
