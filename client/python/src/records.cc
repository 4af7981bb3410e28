#include "client/python/src/records.h"

#include <optional>

#include "client/python/src/errors.h"

namespace memd::python {
namespace {

py::object Type(const char* name) {
  return py::module_::import("memd._types").attr(name);
}

template <typename T>
py::tuple Tuple(const std::vector<T>& items, py::object (*convert)(const T&)) {
  py::tuple tuple(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) tuple[i] = convert(items[i]);
  return tuple;
}

py::object SizeClass(const SizeClassStats& s) {
  return Type("SizeClassStats")(py::arg("bytes") = s.bytes,
                                py::arg("allocations") = s.allocations,
                                py::arg("cached") = s.cached);
}

py::object Pool(const PoolStats& p) {
  py::dict kw;
  kw["location"] = p.location;
  kw["reserved_bytes"] = p.reserved_bytes;
  kw["used_bytes"] = p.used_bytes;
  kw["free_bytes"] = p.free_bytes;
  kw["peak_reserved_bytes"] = p.peak_reserved_bytes;
  kw["peak_used_bytes"] = p.peak_used_bytes;
  kw["hit_count"] = p.hit_count;
  kw["miss_count"] = p.miss_count;
  kw["largest_free_block_bytes"] = p.largest_free_block_bytes;
  kw["fragmentation"] = p.fragmentation;
  kw["segments"] = p.segments;
  kw["scrubbed_bytes"] = p.scrubbed_bytes;
  kw["trimmed_bytes"] = p.trimmed_bytes;
  kw["limit_bytes"] = p.limit_bytes;
  kw["size_classes"] = Tuple(p.size_classes, &SizeClass);
  return Type("PoolStats")(**kw);
}

py::object Device(const DeviceInfo& d) {
  py::dict kw;
  kw["ordinal"] = d.ordinal;
  kw["uuid"] = d.uuid;
  kw["name"] = d.name;
  kw["total_bytes"] = d.total_bytes;
  kw["free_bytes"] = d.free_bytes;
  kw["vmm"] = d.vmm;
  kw["posix_fd"] = d.posix_fd;
  kw["handle_type"] = d.handle_type;
  kw["healthy"] = d.healthy;
  kw["health_error"] = d.health_error;
  kw["api"] = d.api;
  kw["pci_address"] = d.pci_address;
  kw["ipc"] = d.ipc;
  return Type("DeviceInfo")(**kw);
}

// Every field of the public structs reaches Python. A structured binding
// must name every field, so these stop compiling when a struct of
// memd/client.h gains one: extend its conversion below and its dataclass
// in memd/_types.py (whose fields but BufferInfo.attrs have no defaults,
// so a conversion that misses one fails at run time).
[[maybe_unused]] void EveryFieldIsConverted(
    const BufferInfo& buffer,
    const SizeClassStats& size_class,
    const PoolStats& pool,
    const DeviceInfo& device,
    const TransferStats& transfers,
    const DurabilityStats& durability,
    const DaemonStats& stats,
    const SessionInfo& session,
    const UidUsage& usage,
    const TrimmedPool& trimmed,
    const TransferProgress& progress) {
  [[maybe_unused]] const auto& [buffer_0, buffer_1, buffer_2, buffer_3, buffer_4, buffer_5,
                                buffer_6, buffer_7, buffer_8, buffer_9, buffer_10, buffer_11,
                                buffer_12, buffer_13, buffer_14] = buffer;
  [[maybe_unused]] const auto& [size_class_0, size_class_1, size_class_2] = size_class;
  [[maybe_unused]] const auto& [pool_0, pool_1, pool_2, pool_3, pool_4, pool_5, pool_6, pool_7,
                                pool_8, pool_9, pool_10, pool_11, pool_12, pool_13, pool_14] = pool;
  [[maybe_unused]] const auto& [device_0, device_1, device_2, device_3, device_4, device_5,
                                device_6, device_7, device_8, device_9, device_10, device_11,
                                device_12] = device;
  [[maybe_unused]] const auto& [transfers_0, transfers_1, transfers_2, transfers_3, transfers_4,
                                transfers_5, transfers_6] = transfers;
  [[maybe_unused]] const auto& [durability_0, durability_1, durability_2, durability_3,
                                durability_4, durability_5, durability_6, durability_7,
                                durability_8, durability_9, durability_10] = durability;
  [[maybe_unused]] const auto& [stats_0, stats_1, stats_2, stats_3, stats_4, stats_5, stats_6,
                                stats_7, stats_8, stats_9, stats_10, stats_11, stats_12] = stats;
  [[maybe_unused]] const auto& [session_0, session_1, session_2, session_3, session_4,
                                session_5, session_6, session_7] = session;
  [[maybe_unused]] const auto& [usage_0, usage_1, usage_2, usage_3, usage_4] = usage;
  [[maybe_unused]] const auto& [trimmed_0, trimmed_1] = trimmed;
  [[maybe_unused]] const auto& [progress_0, progress_1, progress_2, progress_3, progress_4,
                                progress_5, progress_6, progress_7, progress_8, progress_9] = progress;
}

const char* TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kQueued: return "queued";
    case TransferState::kRunning: return "running";
    case TransferState::kDone: return "done";
    case TransferState::kFailed: return "failed";
    case TransferState::kCancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace

double EpochSeconds(absl::Time time) {
  return absl::ToDoubleSeconds(time - absl::UnixEpoch());
}

py::dict AttrsDict(const std::map<std::string, std::string>& attrs) {
  py::dict dict;
  for (const auto& [key, value] : attrs) dict[py::str(key)] = py::str(value);
  return dict;
}

py::object ToPython(const BufferInfo& info) {
  py::dict kw;
  kw["name"] = info.name;
  kw["id"] = info.id;
  kw["size"] = info.size;
  kw["location"] = info.location;
  kw["owner_uid"] = info.owner_uid;
  kw["owner_gid"] = info.owner_gid;
  kw["mode"] = info.mode;
  kw["state"] = info.state == BufferState::kSealed ? "sealed" : "creating";
  kw["persistent"] = info.persistence == Persistence::kPersistent;
  kw["lease_count"] = info.lease_count;
  kw["unlinked"] = info.unlinked;
  kw["created"] = EpochSeconds(info.created);
  kw["sealed"] = info.sealed.has_value() ? py::object(py::float_(EpochSeconds(*info.sealed)))
                                         : py::object(py::none());
  kw["creator_pid"] = info.creator_pid;
  kw["attrs"] = AttrsDict(info.attrs);
  return Type("BufferInfo")(**kw);
}

py::object ToPython(const DaemonStats& stats) {
  py::dict transfers;
  transfers["active"] = stats.transfers.active;
  transfers["active_bytes"] = stats.transfers.active_bytes;
  transfers["completed"] = stats.transfers.completed;
  transfers["bytes"] = stats.transfers.bytes;
  transfers["failed"] = stats.transfers.failed;
  transfers["retries"] = stats.transfers.retries;
  transfers["rejected"] = stats.transfers.rejected;
  py::dict kw;
  kw["version"] = stats.version;
  kw["backend"] = stats.backend;
  kw["pools"] = Tuple(stats.pools, &Pool);
  kw["buffers"] = stats.buffers;
  kw["sessions"] = stats.sessions;
  kw["leases"] = stats.leases;
  kw["metrics_address"] = stats.metrics_address;
  kw["started"] = EpochSeconds(stats.started);
  kw["devices"] = Tuple(stats.devices, &Device);
  kw["waits"] = stats.waits;
  kw["transfers"] = Type("TransferStats")(**transfers);
  kw["daemon_wide"] = stats.daemon_wide;
  const DurabilityStats& d = stats.durability;
  py::dict durability;
  durability["recording"] = d.recording;
  durability["not_recording"] = d.not_recording;
  durability["generation"] = d.generation;
  durability["recovered"] = d.recovered;
  durability["recovered_at"] = d.recovered ? EpochSeconds(d.recovered_at) : 0.0;
  durability["recovery"] = absl::ToDoubleSeconds(d.recovery);
  durability["adopted_segments"] = d.adopted_segments;
  durability["adopted_buffers"] = d.adopted_buffers;
  durability["adopted_bytes"] = d.adopted_bytes;
  durability["lost_buffers"] = d.lost_buffers;
  durability["lost_segments"] = d.lost_segments;
  kw["durability"] = Type("DurabilityStats")(**durability);
  return Type("DaemonStats")(**kw);
}

py::object ToPython(const SessionInfo& s) {
  py::dict kw;
  kw["id"] = s.id;
  kw["pid"] = s.pid;
  kw["uid"] = s.uid;
  kw["gid"] = s.gid;
  kw["command"] = s.command;
  kw["lease_count"] = s.lease_count;
  kw["started"] = EpochSeconds(s.started);
  kw["created_bytes"] = s.created_bytes;
  return Type("SessionInfo")(**kw);
}

py::object ToPython(const UidUsage& u) {
  return Type("UidUsage")(py::arg("uid") = u.uid, py::arg("location") = u.location,
                          py::arg("bytes") = u.bytes, py::arg("buffers") = u.buffers,
                          py::arg("quota_bytes") = u.quota_bytes);
}

py::object ToPython(const TrimmedPool& pool) {
  return Type("TrimmedPool")(py::arg("location") = pool.location,
                             py::arg("released_bytes") = pool.released_bytes);
}

py::object ToPython(const TransferProgress& p) {
  py::dict kw;
  kw["id"] = p.id;
  kw["state"] = TransferStateName(p.state);
  kw["bytes_done"] = p.bytes_done;
  kw["bytes_total"] = p.bytes_total;
  kw["direction"] = p.direction;
  kw["path"] = p.path;
  kw["device"] = p.device;
  kw["retries"] = p.retries;
  kw["error"] = p.status.ok() ? py::object(py::none()) : ToPythonError(p.status);
  kw["elapsed"] = absl::ToDoubleSeconds(p.elapsed);
  return Type("TransferProgress")(**kw);
}

}  // namespace memd::python
