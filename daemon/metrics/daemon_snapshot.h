#pragma once

#include <string>
#include <vector>

#include "daemon/broker/broker.h"
#include "daemon/broker/types.h"
#include "daemon/durable/report.h"
#include "daemon/backend/backend.h"
#include "daemon/pool/device_memory.h"
#include "daemon/pool/pool.h"
#include "daemon/pool/pool_set.h"
#include "daemon/transfer/engine.h"

namespace memd::metrics {

// What the daemon labels memd_build_info with.
struct BuildInfo {
  std::string version;
  std::string backend;  // host, cuda, ...
};

// Everything one scrape shows, read once at its start: every metric family
// is a function of this, so that no two families of one scrape can show two
// different moments of the same pool, nor the broker's counts and usage two
// moments. (The pools and the broker are read one after the other, not under
// one lock: the broker's figures may be a moment apart from the pools', never
// one pool from itself.)
struct DaemonSnapshot {
  std::vector<pool::PoolStats> pools;  // One per pool, in the set's order.
  broker::BrokerCounts counts;
  std::vector<broker::UidUsage> usage;  // Of the same moment as `counts`.
  // Every uid's leaks by kind (default rules), of the same moment too;
  // empty reads as 0 of each kind.
  std::vector<broker::LeakTotal> leaks;
  transfer::EngineStats transfers;  // Empty without an engine.
  // Each GPU's driver figures beside its pool's, read after the pools
  // (a moment apart: outside_memd never goes below 0). Empty without GPUs.
  std::vector<pool::DeviceMemory> devices;
  BuildInfo build;
  durable::DurabilityStatus durability;  // Fixed since the daemon's start.
};

// Reads each pool's Stats() once, then the broker's Snapshot(), then the
// engine's Stats() (`engine` may be null), then the backend's devices
// (`backend` may be null).
DaemonSnapshot TakeSnapshot(const pool::PoolSet& pools, const broker::Broker& broker,
                            const transfer::Engine* engine, BuildInfo build,
                            durable::DurabilityStatus durability = {},
                            const backend::Backend* backend = nullptr);

}  // namespace memd::metrics
