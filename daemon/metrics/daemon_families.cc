#include "daemon/metrics/daemon_families.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "daemon/metrics/durability_families.h"
#include "daemon/metrics/leak_families.h"
#include "daemon/metrics/transfer_families.h"

namespace memd::metrics {
namespace {

using Labels = std::vector<prometheus::ClientMetric::Label>;
using Read = std::function<void(const DaemonSnapshot&, std::vector<Sample>&)>;
constexpr prometheus::MetricType kGauge = prometheus::MetricType::Gauge;
constexpr prometheus::MetricType kCounter = prometheus::MetricType::Counter;

double Number(std::uint64_t value) { return static_cast<double>(value); }

// {location}, and for a device pool {device} too: dashboards select GPUs by
// ordinal.
Labels PoolLabels(const pool::PoolStats& stats) {
  Labels labels = {{"location", stats.location.ToString()}};
  if (stats.location.kind == Location::Kind::kDevice) {
    labels.push_back({"device", std::to_string(stats.location.device)});
  }
  return labels;
}

Labels With(Labels labels, prometheus::ClientMetric::Label extra) {
  labels.push_back(std::move(extra));
  return labels;
}

// A family with one sample per pool.
Read EachPool(double (*value)(const pool::PoolStats&)) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const pool::PoolStats& stats : snapshot.pools) {
      out.push_back({PoolLabels(stats), value(stats)});
    }
  };
}

// A family with one sample per size class of each pool.
Read EachSizeClass(double (*value)(const pool::SizeClassStats&)) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const pool::PoolStats& stats : snapshot.pools) {
      for (const pool::SizeClassStats& size_class : stats.size_classes) {
        out.push_back({With(PoolLabels(stats), {"size_class", std::to_string(size_class.bytes)}),
                       value(size_class)});
      }
    }
  };
}

// A family with one unlabelled sample.
Read Single(double (*value)(const DaemonSnapshot&)) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    out.push_back({{}, value(snapshot)});
  };
}

void PoolRequests(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const pool::PoolStats& stats : snapshot.pools) {
    out.push_back({With(PoolLabels(stats), {"result", "hit"}), Number(stats.hit_count)});
    out.push_back({With(PoolLabels(stats), {"result", "miss"}), Number(stats.miss_count)});
  }
}

double HitRatio(const pool::PoolStats& stats) {
  const double total = Number(stats.hit_count + stats.miss_count);
  return total == 0 ? 0.0 : Number(stats.hit_count) / total;
}

// Every limit's refusals: the pools' own limits first, then the broker's.
void Rejections(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const pool::PoolStats& stats : snapshot.pools) {
    out.push_back({With(PoolLabels(stats), {"limit", "pool"}), Number(stats.limit_rejections)});
  }
  const broker::LimitRejections& refused = snapshot.counts.rejections;
  out.push_back({{{"limit", "max_buffers"}}, Number(refused.buffers)});
  out.push_back({{{"limit", "max_sessions"}}, Number(refused.sessions)});
  out.push_back({{{"limit", "max_leases_per_session"}}, Number(refused.leases_per_session)});
  // Every location's quota series exists from the start, at 0.
  std::map<std::pair<std::string, std::string>, std::uint64_t> quotas = refused.quotas;
  for (const pool::PoolStats& stats : snapshot.pools) {
    for (const char* quota : {"max_uid_bytes", "max_session_bytes"}) {
      quotas.try_emplace({quota, stats.location.ToString()}, 0);
    }
  }
  for (const auto& [key, count] : quotas) {
    out.push_back({{{"limit", key.first}, {"location", key.second}}, Number(count)});
  }
  out.push_back({{{"limit", "max_waits_per_session"}}, Number(refused.waits_per_session)});
  // Per-uid limits and the daemon-wide bound on waiting opens; the refusal
  // itself names the uid.
  out.push_back({{{"limit", "max_sessions_per_uid"}}, Number(refused.sessions_per_uid)});
  out.push_back({{{"limit", "max_buffers_per_uid"}}, Number(refused.buffers_per_uid)});
  out.push_back({{{"limit", "max_leases_per_uid"}}, Number(refused.leases_per_uid)});
  out.push_back({{{"limit", "max_waits_per_uid"}}, Number(refused.waits_per_uid)});
  out.push_back({{{"limit", "max_waits"}}, Number(refused.waits)});
}

void Buffers(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  out.push_back({{{"state", "creating"}}, Number(snapshot.counts.creating)});
  out.push_back({{{"state", "sealed"}}, Number(snapshot.counts.sealed)});
  out.push_back({{{"state", "unlinked"}}, Number(snapshot.counts.unlinked)});
}

void SyncStates(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const auto& [state, buffers] : snapshot.counts.by_sync_state) {
    out.push_back({{{"state", state}}, Number(buffers)});
  }
}

void ReplicaBytes(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const auto& [direction, bytes] : snapshot.counts.replica_bytes_copied) {
    out.push_back({{{"direction", direction}}, Number(bytes)});
  }
}

// What memory pressure took back, for every pool (0 where nothing went, so
// that a rate() has a series from the start): {location, [device,] kind}.
Read Reclaimed(std::uint64_t broker::PressureCounts::*evicted,
               std::uint64_t broker::PressureCounts::*demoted) {
  return [evicted, demoted](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const pool::PoolStats& stats : snapshot.pools) {
      auto it = snapshot.counts.pressure.find(stats.location.ToString());
      const broker::PressureCounts counts =
          it == snapshot.counts.pressure.end() ? broker::PressureCounts{} : it->second;
      out.push_back({With(PoolLabels(stats), {"kind", "evicted"}), Number(counts.*evicted)});
      out.push_back({With(PoolLabels(stats), {"kind", "demoted"}), Number(counts.*demoted)});
    }
  };
}

// Calls waiting for memory at each pool's location (0 where none wait, so
// that an alert has a series from the start): how many, or their bytes.
Read MemoryWaits(std::uint64_t broker::MemoryWaits::*field) {
  return [field](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const pool::PoolStats& stats : snapshot.pools) {
      auto it = snapshot.counts.memory_waits.find(stats.location.ToString());
      out.push_back({PoolLabels(stats), it == snapshot.counts.memory_waits.end()
                                            ? 0.0
                                            : Number(it->second.*field)});
    }
  };
}

void UidBytes(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const broker::UidUsage& entry : snapshot.usage) {
    out.push_back({{{"uid", std::to_string(entry.uid)}, {"location", entry.location.ToString()}},
                   Number(entry.bytes)});
  }
}

// Each GPU's memory as the driver and memd's pool see it: {device, kind}.
// free and outside_memd only where the driver reports free memory, so that
// an absent series says "unknown", never 0.
void DeviceMemory(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  for (const pool::DeviceMemory& device : snapshot.devices) {
    const std::string ordinal = std::to_string(device.ordinal);
    const auto sample = [&](const char* kind, std::uint64_t bytes) {
      out.push_back({{{"device", ordinal}, {"kind", kind}}, Number(bytes)});
    };
    sample("total", device.total_bytes);
    sample("memd", device.memd_bytes);
    if (device.has_free) {
      sample("free", device.free_bytes);
      sample("outside_memd", device.outside_memd_bytes);
    }
  }
}

void Build(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  out.push_back({{{"version", snapshot.build.version}, {"backend", snapshot.build.backend}}, 1.0});
}

// A flat table: one row per family, in the order scrapes have always shown
// them.
std::vector<FamilySpec> PoolAndBrokerFamilies() {
  using pool::PoolStats;
  using pool::SizeClassStats;
  return {
      {"memd_pool_reserved_bytes", "Bytes the pool holds from the backend, used or not.",
       kGauge, EachPool([](const PoolStats& s) { return Number(s.reserved_bytes); })},
      {"memd_pool_used_bytes", "Bytes handed out in live buffers.", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.used_bytes); })},
      {"memd_pool_free_bytes", "Reserved bytes not in use (kept for reuse).", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.free_bytes()); })},
      {"memd_pool_limit_bytes", "Most bytes the pool may reserve.", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.limit_bytes); })},
      {"memd_pool_segments", "Backend segments the pool holds.", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.segments); })},
      {"memd_pool_requests_total",
       "Allocations by result: hit = served without the backend, miss = not.", kCounter,
       PoolRequests},
      {"memd_pool_hit_ratio", "hits / (hits + misses) since start; 0 before any.", kGauge,
       EachPool(HitRatio)},
      {"memd_pool_peak_reserved_bytes", "Most bytes the pool ever held from the backend.",
       kGauge, EachPool([](const PoolStats& s) { return Number(s.peak_reserved_bytes); })},
      {"memd_pool_peak_used_bytes", "Most bytes ever in live buffers at once.", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.peak_used_bytes); })},
      {"memd_pool_largest_free_block_bytes", "Largest contiguous free block.", kGauge,
       EachPool([](const PoolStats& s) { return Number(s.largest_free_bytes); })},
      {"memd_pool_fragmentation_ratio",
       "1 - largest free block / free bytes: 0 when free memory is one block.", kGauge,
       EachPool([](const PoolStats& s) { return s.fragmentation(); })},
      {"memd_pool_scrubbed_bytes_total",
       "Bytes zeroed before serving another owner/group/mode.", kCounter,
       EachPool([](const PoolStats& s) { return Number(s.scrubbed_bytes); })},
      {"memd_pool_trimmed_bytes_total", "Bytes given back to the backend.", kCounter,
       EachPool([](const PoolStats& s) { return Number(s.trimmed_bytes); })},
      {"memd_pool_size_class_allocations_total", "Allocations served per size class.",
       kCounter, EachSizeClass([](const SizeClassStats& c) { return Number(c.allocations); })},
      {"memd_pool_size_class_cached_blocks", "Freed blocks a size class holds for reuse.",
       kGauge, EachSizeClass([](const SizeClassStats& c) { return Number(c.cached); })},
      {"memd_quota_rejections_total",
       "Requests refused because a limit was reached, by limit (pool: a location's "
       "reserved-bytes limit, with its location).",
       kCounter, Rejections},
      {"memd_buffers",
       "Buffers alive, by state: creating (not sealed yet), sealed, unlinked (no name, "
       "still leased).",
       kGauge, Buffers},
      {"memd_buffers_by_sync_state",
       "Named buffers by where their current copies are: host_only, device_only, "
       "synchronized, host_dirty, device_dirty, mixed (docs/design.md, Replicas).",
       kGauge, SyncStates},
      {"memd_replicas",
       "Copies of named buffers away from their homes (and copies an unlink orphaned that "
       "leases or copies still hold).",
       kGauge, Single([](const DaemonSnapshot& s) { return Number(s.counts.replicas); })},
      {"memd_replica_copies_total",
       "Copies made into replicas: first fills of a location and refreshes of stale ones.",
       kCounter,
       Single([](const DaemonSnapshot& s) { return Number(s.counts.replica_copies); })},
      {"memd_replica_bytes_copied_total",
       "Bytes copied into replicas, by direction (host_to_device, device_to_host, "
       "device_to_device, host_to_host; pinned counts as host).",
       kCounter, ReplicaBytes},
      {"memd_replica_copies_avoided_total",
       "Opens away from a buffer's home served by a copy that was there already.",
       kCounter,
       Single([](const DaemonSnapshot& s) { return Number(s.counts.copies_avoided); })},
      {"memd_pressure_reclaims_total",
       "What a full location (or a uid's quota there, of that uid's own data) took back so "
       "that a create or a copy fits, by kind: evicted "
       "(a whole unleased buffer of retention evictable), demoted (an unleased copy away from "
       "its buffer's home; the next open there makes it again).",
       kCounter,
       Reclaimed(&broker::PressureCounts::evictions, &broker::PressureCounts::demotions)},
      {"memd_pressure_reclaimed_bytes_total",
       "Bytes memory pressure took back, by kind (as memd_pressure_reclaims_total).", kCounter,
       Reclaimed(&broker::PressureCounts::evicted_bytes,
                 &broker::PressureCounts::demoted_bytes)},
      {"memd_memory_waits",
       "Calls waiting for memory at the location now (wait_for_memory: creates, copies): its "
       "pool is full and nothing there may give way.",
       kGauge, MemoryWaits(&broker::MemoryWaits::calls)},
      {"memd_memory_wait_bytes", "Bytes the calls waiting for memory at the location ask for.",
       kGauge, MemoryWaits(&broker::MemoryWaits::bytes)},
      {"memd_uid_bytes",
       "Bytes of live buffers each uid owns, by location (what max_uid_bytes counts); uids "
       "without buffers are absent.",
       kGauge, UidBytes},
      {"memd_sessions", "Connected client sessions.", kGauge,
       Single([](const DaemonSnapshot& s) { return Number(s.counts.sessions); })},
      {"memd_leases", "Leases held by clients.", kGauge,
       Single([](const DaemonSnapshot& s) { return Number(s.counts.leases); })},
      {"memd_device_memory_bytes",
       "Each GPU's memory by kind: total, free (as its driver reports), memd (what memd's "
       "pool holds there), outside_memd (used but not memd's: other processes, drivers' "
       "contexts, and memory memd gave back that clients' imports still hold). free and "
       "outside_memd only where the driver reports free memory.",
       kGauge, DeviceMemory},
      {"memd_build_info", "Always 1; the labels say the build.", kGauge, Build},
  };
}

}  // namespace

const std::vector<FamilySpec>& DaemonFamilies() {
  static const auto* const families = [] {
    auto* all = new std::vector<FamilySpec>(PoolAndBrokerFamilies());
    for (FamilySpec& spec : TransferFamilies()) all->push_back(std::move(spec));
    for (FamilySpec& spec : DurabilityFamilies()) all->push_back(std::move(spec));
    for (FamilySpec& spec : LeakFamilies()) all->push_back(std::move(spec));
    return all;
  }();
  return *families;
}

}  // namespace memd::metrics
