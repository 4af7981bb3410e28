#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/service/call_observer.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace memd::metrics {

/// memd_rpc_duration_seconds{method, code}: a histogram of every call the
/// service finishes. Owns its registry (a Collectable the metrics server
/// serves). Observing is lock-free once a (method, code) pair has been seen;
/// the first observation of a pair takes a mutex to create its series.
/// Thread-safe.
class RpcMetrics : public service::CallObserver {
 public:
  // A series per code for each of `methods` (service::MemdService::
  // MethodNames(): every rpc of memd.v1.Memd); a call of another name is
  // not recorded.
  explicit RpcMetrics(const std::vector<std::string>& methods);

  void Observe(std::string_view method, absl::StatusCode code,
               absl::Duration elapsed) override;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  static constexpr int kCodes = 17;  // absl/gRPC status codes 0..16.
  using Series = std::array<std::atomic<prometheus::Histogram*>, kCodes>;

  prometheus::Histogram* Create(std::string_view method, int code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& family_;
  // Every method given, made at construction: read without a lock.
  absl::flat_hash_map<std::string, std::unique_ptr<Series>> methods_;
  absl::Mutex mu_;  // Serialises creating series.
};

}  // namespace memd::metrics
