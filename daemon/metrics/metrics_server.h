#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace memd::metrics {

/// Serves /metrics over HTTP (prometheus-cpp's pull exposer) for one
/// collectable. Owns the exposer (its threads) and shares the collectable.
/// Thread-safe.
class MetricsServer {
 public:
  // Binds HOST:PORT (port 0 picks a free one) and serves the collectables.
  // Errors: UNAVAILABLE when the address cannot be bound (in use, bad host),
  // naming it, why, and the metrics_address values that would do.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);

  // HOST:PORT with the port actually bound.
  const std::string& address() const { return address_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
                std::string address)
      : exposer_(std::move(exposer)),
        collectables_(std::move(collectables)),
        address_(std::move(address)) {}

  std::unique_ptr<prometheus::Exposer> exposer_;
  // Kept alive here: the exposer holds only weak references.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::string address_;
};

}  // namespace memd::metrics
