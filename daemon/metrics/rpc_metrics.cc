#include "daemon/metrics/rpc_metrics.h"

#include "absl/status/status.h"

namespace memd::metrics {
namespace {

// 25 us (a local call) to 30 s (an Open waiting for a seal).
const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0, 30.0};
  return buckets;
}

}  // namespace

RpcMetrics::RpcMetrics(const std::vector<std::string>& methods)
    : registry_(std::make_shared<prometheus::Registry>()),
      family_(prometheus::BuildHistogram()
                  .Name("memd_rpc_duration_seconds")
                  .Help("Time to finish a call, by method and status code "
                        "(waiting opens included).")
                  .Register(*registry_)) {
  for (const std::string& method : methods) {
    auto series = std::make_unique<Series>();
    for (auto& histogram : *series) histogram.store(nullptr);
    methods_.emplace(method, std::move(series));
  }
}

prometheus::Histogram* RpcMetrics::Create(std::string_view method, int code) {
  absl::MutexLock lock(&mu_);
  std::atomic<prometheus::Histogram*>& slot =
      (*methods_.find(absl::string_view(method.data(), method.size()))->second)[code];
  if (prometheus::Histogram* existing = slot.load()) return existing;
  prometheus::Histogram* histogram = &family_.Add(
      {{"method", std::string(method)},
       {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}},
      Buckets());
  slot.store(histogram);
  return histogram;
}

void RpcMetrics::Observe(std::string_view method, absl::StatusCode code,
                         absl::Duration elapsed) {
  auto series = methods_.find(absl::string_view(method.data(), method.size()));
  const int index = static_cast<int>(code);
  if (series == methods_.end() || index < 0 || index >= kCodes) return;
  prometheus::Histogram* histogram = (*series->second)[index].load(std::memory_order_acquire);
  if (histogram == nullptr) histogram = Create(method, index);
  histogram->Observe(absl::ToDoubleSeconds(elapsed));
}

}  // namespace memd::metrics
