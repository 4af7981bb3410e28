#include "client/src/report_json.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace memd::internal {

std::string FormatMode(std::uint32_t mode) { return absl::StrFormat("%04o", mode); }

std::string StateName(BufferState state) {
  return state == BufferState::kSealed ? "sealed" : "creating";
}

std::string PersistenceName(Persistence persistence) {
  return persistence == Persistence::kEphemeral ? "ephemeral" : "persistent";
}

std::string TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kQueued: return "queued";
    case TransferState::kRunning: return "running";
    case TransferState::kDone: return "done";
    case TransferState::kFailed: return "failed";
    case TransferState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::int64_t UnixNanos(absl::Time time) { return absl::ToUnixNanos(time); }

Json BufferJson(const BufferInfo& info) {
  Json json;
  json["name"] = info.name;
  json["id"] = info.id;
  json["size_bytes"] = info.size;
  json["location"] = info.location;
  json["owner_uid"] = info.owner_uid;
  json["owner_gid"] = info.owner_gid;
  json["mode"] = FormatMode(info.mode);
  json["state"] = StateName(info.state);
  json["persistence"] = PersistenceName(info.persistence);
  json["lease_count"] = info.lease_count;
  json["unlinked"] = info.unlinked;
  json["created_unix_ns"] = UnixNanos(info.created);
  json["sealed_unix_ns"] =
      info.sealed.has_value() ? Json(UnixNanos(*info.sealed)) : Json(nullptr);
  json["creator_pid"] = info.creator_pid;
  json["attrs"] = Json::object();
  for (const auto& [key, value] : info.attrs) json["attrs"][key] = value;
  json["replicas"] = Json::array();
  for (const ReplicaInfo& replica : info.replicas) {
    json["replicas"].push_back(Json{{"location", replica.location},
                                    {"state", replica.state},
                                    {"generation", replica.generation},
                                    {"readers", replica.readers},
                                    {"writers", replica.writers},
                                    {"bytes", replica.bytes},
                                    {"charged_uid", replica.charged_uid}});
  }
  json["sync_state"] = info.sync_state;
  json["generation"] = info.generation;
  json["fill_failure"] = info.fill_failure;
  json["usage"] = BufferUsageJson(info.usage);
  json["placement"] = info.placement;
  json["retention"] = info.retention;
  json["numa_node"] = info.numa_node;
  return json;
}

Json BufferUsageJson(const BufferUsage& usage) {
  Json json;
  json["opens_by_location"] = usage.opens_by_location;  // std::map<std::string, ...>: an object.
  // JSON keys are strings: the uid in decimal, as the protocol's JSON
  // mapping writes it (a map with number keys would become an array).
  json["opens_by_uid"] = Json::object();
  for (const auto& [uid, n] : usage.opens_by_uid) json["opens_by_uid"][std::to_string(uid)] = n;
  json["lazy_copies"] = usage.lazy_copies;
  json["bytes_copied"] = usage.bytes_copied;
  json["copies_avoided"] = usage.copies_avoided;
  json["last_used_unix_ns"] = usage.last_used.has_value() ? UnixNanos(*usage.last_used) : 0;
  return json;
}

Json RecommendationJson(const Recommendation& recommendation) {
  Json json;
  json["subject"] = recommendation.subject;
  json["action"] = recommendation.action;
  json["locations"] = recommendation.locations;
  json["evidence"] = recommendation.evidence;
  json["bytes"] = recommendation.bytes;
  return json;
}

Json LeakJson(const Leak& leak) {
  Json json;
  json["uid"] = leak.uid;
  json["kind"] = leak.kind;
  json["subject"] = leak.subject;
  json["bytes"] = leak.bytes;
  json["age_seconds"] = absl::ToDoubleSeconds(leak.age);
  json["pid"] = leak.pid;
  json["evidence"] = leak.evidence;
  return json;
}

Json LeakReportJson(const LeakReport& report) {
  Json json;
  json["leaks"] = Json::array();
  for (const Leak& leak : report.leaks) json["leaks"].push_back(LeakJson(leak));
  json["omitted"] = report.omitted;
  return json;
}

Json UsageJson(const UidUsage& usage) {
  Json json;
  json["uid"] = usage.uid;
  json["location"] = usage.location;
  json["bytes"] = usage.bytes;
  json["buffers"] = usage.buffers;
  json["quota_bytes"] = usage.quota_bytes;
  return json;
}

Json SessionJson(const SessionInfo& session) {
  Json json;
  json["id"] = session.id;
  json["pid"] = session.pid;
  json["uid"] = session.uid;
  json["gid"] = session.gid;
  json["command"] = session.command;
  json["lease_count"] = session.lease_count;
  json["started_unix_ns"] = UnixNanos(session.started);
  json["created_bytes"] = session.created_bytes;
  return json;
}

Json StatsJson(const DaemonStats& stats, const std::string& socket_dir) {
  Json json;
  json["version"] = stats.version;
  json["backend"] = stats.backend;
  json["socket_dir"] = socket_dir;
  json["started_unix_ns"] = UnixNanos(stats.started);
  json["metrics_address"] = stats.metrics_address;
  json["buffers"] = stats.buffers;
  json["sessions"] = stats.sessions;
  json["leases"] = stats.leases;
  json["waits"] = stats.waits;
  json["daemon_wide"] = stats.daemon_wide;
  Json pools = Json::array();
  for (const PoolStats& pool : stats.pools) {
    Json entry;
    entry["location"] = pool.location;
    entry["reserved_bytes"] = pool.reserved_bytes;
    entry["used_bytes"] = pool.used_bytes;
    entry["hit_count"] = pool.hit_count;
    entry["miss_count"] = pool.miss_count;
    entry["free_bytes"] = pool.free_bytes;
    entry["peak_reserved_bytes"] = pool.peak_reserved_bytes;
    entry["peak_used_bytes"] = pool.peak_used_bytes;
    entry["largest_free_block_bytes"] = pool.largest_free_block_bytes;
    entry["fragmentation"] = pool.fragmentation;
    entry["segments"] = pool.segments;
    entry["scrubbed_bytes"] = pool.scrubbed_bytes;
    entry["trimmed_bytes"] = pool.trimmed_bytes;
    entry["limit_bytes"] = pool.limit_bytes;
    entry["evictions"] = pool.evictions;
    entry["evicted_bytes"] = pool.evicted_bytes;
    entry["demotions"] = pool.demotions;
    entry["demoted_bytes"] = pool.demoted_bytes;
    Json classes = Json::array();
    for (const SizeClassStats& size_class : pool.size_classes) {
      classes.push_back(Json{{"bytes", size_class.bytes},
                             {"allocations", size_class.allocations},
                             {"cached", size_class.cached}});
    }
    entry["size_classes"] = std::move(classes);
    pools.push_back(std::move(entry));
  }
  json["pools"] = std::move(pools);
  Json devices = Json::array();
  for (const DeviceInfo& device : stats.devices) devices.push_back(DeviceJson(device));
  json["devices"] = std::move(devices);
  json["transfers"] = TransferStatsJson(stats.transfers);
  json["durability"] = DurabilityJson(stats.durability);
  Json memory_waits = Json::array();
  for (const MemoryWaits& waits : stats.memory_waits) {
    memory_waits.push_back(
        Json{{"location", waits.location}, {"calls", waits.calls}, {"bytes", waits.bytes}});
  }
  json["memory_waits"] = std::move(memory_waits);
  return json;
}

Json DeviceJson(const DeviceInfo& device) {
  Json json;
  json["ordinal"] = device.ordinal;
  json["uuid"] = device.uuid;
  json["name"] = device.name;
  json["total_bytes"] = device.total_bytes;
  json["free_bytes"] = device.free_bytes;
  json["vmm"] = device.vmm;
  json["posix_fd"] = device.posix_fd;
  json["handle_type"] = device.handle_type;
  json["healthy"] = device.healthy;
  json["health_error"] = device.health_error;
  json["api"] = device.api;
  json["pci_address"] = device.pci_address;
  json["ipc"] = device.ipc;
  json["has_free"] = device.has_free;
  json["memd_bytes"] = device.memd_bytes;
  json["outside_memd_bytes"] = device.outside_memd_bytes;
  return json;
}

Json TransferStatsJson(const TransferStats& transfers) {
  Json json;
  json["active"] = transfers.active;
  json["active_bytes"] = transfers.active_bytes;
  json["completed"] = transfers.completed;
  json["bytes"] = transfers.bytes;
  json["failed"] = transfers.failed;
  json["retries"] = transfers.retries;
  json["rejected"] = transfers.rejected;
  return json;
}

Json DurabilityJson(const DurabilityStats& durability) {
  Json json;
  json["recording"] = durability.recording;
  json["not_recording"] = durability.not_recording;
  json["generation"] = durability.generation;
  json["recovered"] = durability.recovered;
  json["recovered_unix_ns"] = UnixNanos(durability.recovered_at);
  json["recovery_ns"] = absl::ToInt64Nanoseconds(durability.recovery);
  json["adopted_segments"] = durability.adopted_segments;
  json["adopted_buffers"] = durability.adopted_buffers;
  json["adopted_bytes"] = durability.adopted_bytes;
  json["lost_buffers"] = durability.lost_buffers;
  json["lost_segments"] = durability.lost_segments;
  return json;
}

Json TrimmedPoolJson(const TrimmedPool& pool) {
  Json json{{"location", pool.location}, {"released_bytes", pool.released_bytes}};
  // null: the driver cannot say (a host pool, or no free-memory query).
  json["driver_freed_bytes"] =
      pool.driver_freed_bytes.has_value() ? Json(*pool.driver_freed_bytes) : Json(nullptr);
  return json;
}

Json TransferProgressJson(const TransferProgress& progress) {
  Json json;
  json["id"] = progress.id;
  json["state"] = TransferStateName(progress.state);
  json["bytes_done"] = progress.bytes_done;
  json["bytes_total"] = progress.bytes_total;
  json["direction"] = progress.direction;
  json["path"] = progress.path;
  json["device"] = progress.device;
  json["retries"] = progress.retries;
  json["error_code"] = static_cast<int>(progress.status.code());
  json["error_message"] = std::string(progress.status.message());
  json["elapsed_ns"] = absl::ToInt64Nanoseconds(progress.elapsed);
  return json;
}

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace memd::internal
