#pragma once

#include <vector>

#include "daemon/metrics/daemon_families.h"

namespace memd::metrics {

// Durability's families (memd_generation, memd_recovery_*,
// memd_durability_recording): what this memd's start took back and whether
// its buffers will outlive it. Fixed from the start on, so an alert can ask
// "did memd restart and lose anything" (memd_recovery_lost_buffers > 0)
// without comparing scrapes. Last in a scrape.
std::vector<FamilySpec> DurabilityFamilies();

}  // namespace memd::metrics
