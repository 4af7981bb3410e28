#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.h"

namespace memd::test {

/// A real Prometheus server (Debian's /usr/bin/prometheus) for tests: on a
/// free loopback port, with a temporary data directory, running the scrape
/// configuration shipped in deploy/prometheus/prometheus.yml with its target
/// replaced by the memd under test and a 1 s scrape interval. Kills the
/// server on destruction. Not thread-safe.
class PrometheusServer {
 public:
  // Where Debian installs it; tests skip (saying so) when it is missing.
  static constexpr char kBinary[] = "/usr/bin/prometheus";
  static bool Installed();

  // Starts it scraping `target` (HOST:PORT of memd's metrics) with the
  // shipped configuration, and, where `plain_job` names one, also as a job of
  // that name without relabelling (as a user writes one from Prometheus's
  // documentation); waits until it is ready. Errors: INTERNAL with its log
  // when it does not start.
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(
      const std::string& target, absl::Duration timeout = absl::Seconds(60),
      const std::string& plain_job = "");
  ~PrometheusServer();

  const std::string& address() const { return address_; }

  // GET /api/v1/query?query=...: the "data" object. Errors:
  // INVALID_ARGUMENT with Prometheus's message when the query does not
  // parse; UNAVAILABLE when the server does not answer.
  absl::StatusOr<nlohmann::json> Query(const std::string& promql);

  // Waits until `promql` returns at least one series.
  absl::Status AwaitData(const std::string& promql,
                         absl::Duration timeout = absl::Seconds(60));

  std::string Log() const;

 private:
  PrometheusServer() = default;

  TempDir dir_;
  std::string address_;
  pid_t pid_ = -1;
};

}  // namespace memd::test
