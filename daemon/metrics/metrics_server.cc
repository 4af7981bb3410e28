#include "daemon/metrics/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace memd::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // One serving thread is plenty for a scrape every few seconds.
    exposer = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", error.what()));
  }
  for (const auto& collectable : collectables) exposer->RegisterCollectable(collectable);
  std::vector<int> ports = exposer->GetListeningPorts();
  std::string host = address.substr(0, address.rfind(':'));
  std::string bound =
      ports.empty() ? address : absl::StrCat(host, ":", ports.front());
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(exposer), std::move(collectables), bound));
}

}  // namespace memd::metrics
