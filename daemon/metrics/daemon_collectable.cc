#include "daemon/metrics/daemon_collectable.h"

#include <string>
#include <utility>

#include "daemon/metrics/daemon_families.h"

namespace memd::metrics {

DaemonCollectable::DaemonCollectable(const pool::PoolSet& pools,
                                     const broker::Broker& broker,
                                     const transfer::Engine* engine,
                                     std::string version, std::string backend,
                                     durable::DurabilityStatus durability,
                                     const backend::Backend* devices)
    : pools_(pools),
      broker_(broker),
      engine_(engine),
      build_{std::move(version), std::move(backend)},
      durability_(std::move(durability)),
      devices_(devices) {}

std::vector<prometheus::MetricFamily> DaemonCollectable::Collect() const {
  const DaemonSnapshot snapshot = TakeSnapshot(pools_, broker_, engine_, build_, durability_, devices_);
  std::vector<prometheus::MetricFamily> families;
  std::vector<Sample> samples;
  for (const FamilySpec& spec : DaemonFamilies()) {
    prometheus::MetricFamily& family = families.emplace_back(prometheus::MetricFamily{
        std::string(spec.name), std::string(spec.help), spec.type, {}});
    samples.clear();
    spec.read(snapshot, samples);
    for (Sample& sample : samples) {
      prometheus::ClientMetric& metric = family.metric.emplace_back();
      metric.label = std::move(sample.labels);
      if (spec.type == prometheus::MetricType::Counter) {
        metric.counter.value = sample.value;
      } else {
        metric.gauge.value = sample.value;
      }
    }
  }
  return families;
}

}  // namespace memd::metrics
