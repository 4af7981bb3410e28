#include "daemon/metrics/daemon_snapshot.h"

#include <utility>

namespace memd::metrics {

DaemonSnapshot TakeSnapshot(const pool::PoolSet& pools, const broker::Broker& broker,
                            const transfer::Engine* engine, BuildInfo build,
                            durable::DurabilityStatus durability,
                            const backend::Backend* backend) {
  DaemonSnapshot snapshot;
  snapshot.pools = pools.Stats();
  broker::BrokerSnapshot state = broker.Snapshot();
  snapshot.counts = state.counts;
  snapshot.usage = std::move(state.usage);
  snapshot.leaks = std::move(state.leaks);
  if (engine != nullptr) snapshot.transfers = engine->Stats();
  snapshot.build = std::move(build);
  snapshot.durability = std::move(durability);
  if (backend != nullptr) {
    for (const backend::DeviceInfo& device : backend->devices()) {
      snapshot.devices.push_back(pool::AccountDevice(device, snapshot.pools));
    }
  }
  return snapshot;
}

}  // namespace memd::metrics
