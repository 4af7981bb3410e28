#pragma once

#include <vector>

#include "daemon/metrics/daemon_families.h"

namespace memd::metrics {

// The leak report's totals (memd_leaks{kind}, memd_leak_bytes{kind}): every
// uid's, by the report's default rules (an hour; 1024 leases), computed at
// scrape time (Broker::Snapshot), so that an alert can fire on forgotten
// memory without anyone running `memctl leaks`. Every kind is present, at 0
// when there is none.
std::vector<FamilySpec> LeakFamilies();

}  // namespace memd::metrics
