#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "daemon/metrics/daemon_snapshot.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace memd::metrics {

// One series of a family: its labels and its value.
struct Sample {
  std::vector<prometheus::ClientMetric::Label> labels;
  double value = 0;
};

// One metric family, declared once: what Prometheus shows (name, help,
// type) and how to read its samples from a scrape's snapshot. Names, help
// texts and labels are an interface: dashboards (deploy/grafana) and alerts
// query them.
struct FamilySpec {
  std::string_view name;
  std::string_view help;
  prometheus::MetricType type;  // Gauge or Counter.
  // Appends the family's samples, in the order a scrape shows them.
  using Reader = std::function<void(const DaemonSnapshot&, std::vector<Sample>&)>;
  Reader read;
};

// Every family of the daemon's state, in the order a scrape shows them.
// (The RPC families are rpc_metrics.h's: prometheus-cpp keeps those.)
const std::vector<FamilySpec>& DaemonFamilies();

}  // namespace memd::metrics
