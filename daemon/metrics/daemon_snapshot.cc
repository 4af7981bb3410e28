#include "daemon/metrics/daemon_snapshot.h"

#include <utility>

namespace memd::metrics {

DaemonSnapshot TakeSnapshot(const pool::PoolSet& pools, const broker::Broker& broker,
                            const transfer::Engine* engine, BuildInfo build,
                            durable::DurabilityStatus durability) {
  DaemonSnapshot snapshot;
  snapshot.pools = pools.Stats();
  broker::BrokerSnapshot state = broker.Snapshot();
  snapshot.counts = state.counts;
  snapshot.usage = std::move(state.usage);
  snapshot.leaks = std::move(state.leaks);
  if (engine != nullptr) snapshot.transfers = engine->Stats();
  snapshot.build = std::move(build);
  snapshot.durability = std::move(durability);
  return snapshot;
}

}  // namespace memd::metrics
