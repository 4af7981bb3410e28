#include "daemon/metrics/daemon_snapshot.h"

#include <utility>

namespace memd::metrics {

DaemonSnapshot TakeSnapshot(const pool::PoolSet& pools, const broker::Broker& broker,
                            BuildInfo build) {
  DaemonSnapshot snapshot;
  snapshot.pools = pools.Stats();
  snapshot.counts = broker.Counts();
  // Session 0 is no client: the daemon's own view, every uid.
  if (auto usage = broker.Usage(0); usage.ok()) snapshot.usage = *std::move(usage);
  snapshot.build = std::move(build);
  return snapshot;
}

}  // namespace memd::metrics
