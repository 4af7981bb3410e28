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
  return Type("DeviceInfo")(**kw);
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
