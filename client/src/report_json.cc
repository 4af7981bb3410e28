#include "client/src/report_json.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "client/src/record_fields.h"

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

std::string PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kCritical: return "critical";
    case Priority::kNormal: return "normal";
    case Priority::kBackground: return "background";
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
  for (const ReplicaInfo& replica : info.replicas) json["replicas"].push_back(TableJson(replica));
  json["sync_state"] = info.sync_state;
  json["generation"] = info.generation;
  json["fill_failure"] = info.fill_failure;
  json["usage"] = BufferUsageJson(info.usage);
  json["placement"] = info.placement;
  json["retention"] = info.retention;
  json["numa_node"] = info.numa_node;
  json["holders"] = TableJson(info.holders);
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
  return TableJson(recommendation);
}

Json LeakJson(const Leak& leak) {
  return TableJson(leak);
}

Json LeakReportJson(const LeakReport& report) {
  Json json;
  json["leaks"] = Json::array();
  for (const Leak& leak : report.leaks) json["leaks"].push_back(LeakJson(leak));
  json["omitted"] = report.omitted;
  return json;
}

Json UsageJson(const UidUsage& usage) {
  return TableJson(usage);
}

Json SessionJson(const SessionInfo& session) {
  return TableJson(session);
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
  for (const PoolStats& pool : stats.pools) pools.push_back(TableJson(pool));
  json["pools"] = std::move(pools);
  Json devices = Json::array();
  for (const DeviceInfo& device : stats.devices) devices.push_back(DeviceJson(device));
  json["devices"] = std::move(devices);
  json["transfers"] = TransferStatsJson(stats.transfers);
  json["durability"] = DurabilityJson(stats.durability);
  Json memory_waits = Json::array();
  for (const MemoryWaits& waits : stats.memory_waits) memory_waits.push_back(TableJson(waits));
  json["memory_waits"] = std::move(memory_waits);
  return json;
}

Json DeviceJson(const DeviceInfo& device) {
  return TableJson(device);
}

Json TransferStatsJson(const TransferStats& transfers) {
  return TableJson(transfers);
}

Json DurabilityJson(const DurabilityStats& durability) {
  return TableJson(durability);
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

Json TransferInfoJson(const TransferInfo& transfer) { return TableJson(transfer); }

Json TransferListJson(const TransferList& list) { return TableJson(list); }

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace memd::internal
