#include "daemon/metrics/daemon_collectable.h"

#include <map>
#include <string>
#include <utility>

namespace memd::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  return MetricFamily{std::move(name), std::move(help), type, {}};
}

void AddGauge(MetricFamily& family, std::vector<ClientMetric::Label> labels,
              double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

void AddCounter(MetricFamily& family, std::vector<ClientMetric::Label> labels,
                double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

DaemonCollectable::DaemonCollectable(const pool::PoolSet& pools,
                                     const broker::Broker& broker,
                                     std::string version, std::string backend)
    : pools_(pools),
      broker_(broker),
      version_(std::move(version)),
      backend_(std::move(backend)) {}

std::vector<MetricFamily> DaemonCollectable::Collect() const {
  auto reserved = Family("memd_pool_reserved_bytes",
                         "Bytes the pool holds from the backend, used or not.",
                         MetricType::Gauge);
  auto used = Family("memd_pool_used_bytes", "Bytes handed out in live buffers.",
                     MetricType::Gauge);
  auto free = Family("memd_pool_free_bytes",
                     "Reserved bytes not in use (kept for reuse).",
                     MetricType::Gauge);
  auto limit = Family("memd_pool_limit_bytes",
                      "Most bytes the pool may reserve.", MetricType::Gauge);
  auto segments = Family("memd_pool_segments",
                         "Backend segments the pool holds.", MetricType::Gauge);
  auto requests = Family(
      "memd_pool_requests_total",
      "Allocations by result: hit = served without the backend, miss = not.",
      MetricType::Counter);
  auto hit_ratio = Family("memd_pool_hit_ratio",
                          "hits / (hits + misses) since start; 0 before any.",
                          MetricType::Gauge);
  auto peak_reserved = Family("memd_pool_peak_reserved_bytes",
                              "Most bytes the pool ever held from the backend.",
                              MetricType::Gauge);
  auto peak_used = Family("memd_pool_peak_used_bytes",
                          "Most bytes ever in live buffers at once.",
                          MetricType::Gauge);
  auto largest_free = Family("memd_pool_largest_free_block_bytes",
                             "Largest contiguous free block.", MetricType::Gauge);
  auto fragmentation = Family(
      "memd_pool_fragmentation_ratio",
      "1 - largest free block / free bytes: 0 when free memory is one block.",
      MetricType::Gauge);
  auto scrubbed = Family("memd_pool_scrubbed_bytes_total",
                         "Bytes zeroed before serving another owner/group/mode.",
                         MetricType::Counter);
  auto trimmed = Family("memd_pool_trimmed_bytes_total",
                        "Bytes given back to the backend.", MetricType::Counter);
  auto class_allocations = Family("memd_pool_size_class_allocations_total",
                                  "Allocations served per size class.",
                                  MetricType::Counter);
  auto class_cached = Family("memd_pool_size_class_cached_blocks",
                             "Freed blocks a size class holds for reuse.",
                             MetricType::Gauge);
  auto rejections = Family(
      "memd_quota_rejections_total",
      "Requests refused because a limit was reached, by limit (pool: a "
      "location's reserved-bytes limit, with its location).",
      MetricType::Counter);
  for (const pool::PoolStats& stats : pools_.Stats()) {
    const std::string location = stats.location.ToString();
    // Device pools carry the ordinal as a label of its own too.
    std::vector<ClientMetric::Label> labels = {{"location", location}};
    if (stats.location.kind == Location::Kind::kDevice) {
      labels.push_back({"device", std::to_string(stats.location.device)});
    }
    auto with = [&labels](ClientMetric::Label extra) {
      std::vector<ClientMetric::Label> more = labels;
      more.push_back(std::move(extra));
      return more;
    };
    AddGauge(reserved, labels, static_cast<double>(stats.reserved_bytes));
    AddGauge(used, labels, static_cast<double>(stats.used_bytes));
    AddGauge(free, labels, static_cast<double>(stats.free_bytes()));
    AddGauge(limit, labels, static_cast<double>(stats.limit_bytes));
    AddGauge(segments, labels, static_cast<double>(stats.segments));
    AddCounter(requests, with({"result", "hit"}), static_cast<double>(stats.hit_count));
    AddCounter(requests, with({"result", "miss"}), static_cast<double>(stats.miss_count));
    AddCounter(rejections, with({"limit", "pool"}),
               static_cast<double>(stats.limit_rejections));
    const double total = static_cast<double>(stats.hit_count + stats.miss_count);
    AddGauge(hit_ratio, labels,
             total == 0 ? 0.0 : static_cast<double>(stats.hit_count) / total);
    AddGauge(peak_reserved, labels, static_cast<double>(stats.peak_reserved_bytes));
    AddGauge(peak_used, labels, static_cast<double>(stats.peak_used_bytes));
    AddGauge(largest_free, labels, static_cast<double>(stats.largest_free_bytes));
    AddGauge(fragmentation, labels, stats.fragmentation());
    AddCounter(scrubbed, labels, static_cast<double>(stats.scrubbed_bytes));
    AddCounter(trimmed, labels, static_cast<double>(stats.trimmed_bytes));
    for (const pool::SizeClassStats& size_class : stats.size_classes) {
      std::vector<ClientMetric::Label> class_labels =
          with({"size_class", std::to_string(size_class.bytes)});
      AddCounter(class_allocations, class_labels,
                 static_cast<double>(size_class.allocations));
      AddGauge(class_cached, class_labels, static_cast<double>(size_class.cached));
    }
  }
  broker::BrokerCounts counts = broker_.Counts();
  auto buffers = Family(
      "memd_buffers",
      "Buffers alive, by state: creating (not sealed yet), sealed, unlinked "
      "(no name, still leased).",
      MetricType::Gauge);
  AddGauge(buffers, {{"state", "creating"}}, static_cast<double>(counts.creating));
  AddGauge(buffers, {{"state", "sealed"}}, static_cast<double>(counts.sealed));
  AddGauge(buffers, {{"state", "unlinked"}}, static_cast<double>(counts.unlinked));
  const broker::LimitRejections& refused = counts.rejections;
  AddCounter(rejections, {{"limit", "max_buffers"}}, static_cast<double>(refused.buffers));
  AddCounter(rejections, {{"limit", "max_sessions"}},
             static_cast<double>(refused.sessions));
  AddCounter(rejections, {{"limit", "max_leases_per_session"}},
             static_cast<double>(refused.leases_per_session));
  // Every location's quota series exists from the start, at 0.
  std::map<std::pair<std::string, std::string>, std::uint64_t> quotas = refused.quotas;
  for (const pool::PoolStats& stats : pools_.Stats()) {
    for (const char* quota : {"max_uid_bytes", "max_session_bytes"}) {
      quotas.try_emplace({quota, stats.location.ToString()}, 0);
    }
  }
  for (const auto& [key, count] : quotas) {
    AddCounter(rejections, {{"limit", key.first}, {"location", key.second}},
               static_cast<double>(count));
  }
  AddCounter(rejections, {{"limit", "max_waits_per_session"}},
             static_cast<double>(refused.waits_per_session));
  // Per-uid limits and the daemon-wide bound on waiting opens; the refusal
  // itself names the uid.
  const std::pair<const char*, std::uint64_t> per_uid[] = {
      {"max_sessions_per_uid", refused.sessions_per_uid},
      {"max_buffers_per_uid", refused.buffers_per_uid},
      {"max_leases_per_uid", refused.leases_per_uid},
      {"max_waits_per_uid", refused.waits_per_uid},
      {"max_waits", refused.waits}};
  for (const auto& [limit, count] : per_uid) {
    AddCounter(rejections, {{"limit", limit}}, static_cast<double>(count));
  }
  auto uid_bytes = Family(
      "memd_uid_bytes",
      "Bytes of live buffers each uid owns, by location (what max_uid_bytes "
      "counts); uids without buffers are absent.",
      MetricType::Gauge);
  if (auto usage = broker_.Usage(0); usage.ok()) {
    for (const broker::UidUsage& entry : *usage) {
      AddGauge(uid_bytes,
               {{"uid", std::to_string(entry.uid)}, {"location", entry.location.ToString()}},
               static_cast<double>(entry.bytes));
    }
  }
  auto sessions = Family("memd_sessions", "Connected client sessions.",
                         MetricType::Gauge);
  AddGauge(sessions, {}, static_cast<double>(counts.sessions));
  auto leases = Family("memd_leases", "Leases held by clients.", MetricType::Gauge);
  AddGauge(leases, {}, static_cast<double>(counts.leases));
  auto build = Family("memd_build_info", "Always 1; the labels say the build.",
                      MetricType::Gauge);
  AddGauge(build, {{"version", version_}, {"backend", backend_}}, 1.0);
  return {reserved,     used,          free,      limit,     segments,
          requests,     hit_ratio,     peak_reserved, peak_used, largest_free,
          fragmentation, scrubbed,     trimmed,   class_allocations, class_cached,
          rejections,   buffers,       uid_bytes, sessions,  leases,    build};
}

}  // namespace memd::metrics
