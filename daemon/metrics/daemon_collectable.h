#pragma once

#include <vector>

#include "daemon/broker/broker.h"
#include "daemon/durable/report.h"
#include "daemon/metrics/daemon_snapshot.h"
#include "daemon/pool/pool_set.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace memd::metrics {

/// Builds memd's metric families (daemon_families.h) from live state each
/// time Prometheus scrapes: no background thread, nothing to lag. Each
/// scrape reads one DaemonSnapshot and every family from it. Borrows the
/// pools, the broker and the transfer engine (may be null), which outlive it. Thread-safe (reads only
/// thread-safe snapshots).
class DaemonCollectable : public prometheus::Collectable {
 public:
  // `version` and `backend` (host, cuda, ...) label memd_build_info;
  // `durability` is what recovery found (the daemon starts the metrics
  // after it ran); `devices`, the backend whose GPUs memd_device_memory_bytes
  // shows (null: none), is borrowed too.
  DaemonCollectable(const pool::PoolSet& pools, const broker::Broker& broker,
                    const transfer::Engine* engine, std::string version,
                    std::string backend, durable::DurabilityStatus durability = {},
                    const backend::Backend* devices = nullptr);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const pool::PoolSet& pools_;
  const broker::Broker& broker_;
  const transfer::Engine* const engine_;
  const BuildInfo build_;
  const durable::DurabilityStatus durability_;
  const backend::Backend* const devices_;
};

}  // namespace memd::metrics
