#include "tools/memctl/format.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"
#include "tools/memctl/progress.h"

namespace memd::memctl {
namespace {

// Buffer size for getpwuid_r/getgrgid_r when sysconf has no opinion.
constexpr long kDefaultNameBuffer = 16384;

long NameBufferSize(int name) {
  long size = ::sysconf(name);
  return size > 0 ? size : kDefaultNameBuffer;
}

}  // namespace

std::string FormatMode(std::uint32_t mode) { return absl::StrFormat("%04o", mode); }

std::string StateName(BufferState state) {
  return state == BufferState::kSealed ? "sealed" : "creating";
}

std::string PersistenceName(Persistence persistence) {
  return persistence == Persistence::kEphemeral ? "ephemeral" : "persistent";
}

std::string FormatLocalTime(absl::Time time) {
  if (time == absl::UnixEpoch()) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", time, absl::LocalTimeZone());
}

std::string FormatAge(absl::Duration age) {
  if (age < absl::ZeroDuration()) age = absl::ZeroDuration();
  return absl::FormatDuration(absl::Trunc(age, absl::Seconds(1)));
}

std::string UserName(uid_t uid) {
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETPW_R_SIZE_MAX)));
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_name;
  }
  return absl::StrCat(uid);
}

std::optional<uid_t> ParseUser(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::uint32_t number = 0;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    if (!absl::SimpleAtoi(text, &number)) return std::nullopt;
    return static_cast<uid_t>(number);
  }
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETPW_R_SIZE_MAX)));
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwnam_r(text.c_str(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_uid;
  }
  return std::nullopt;
}

std::string GroupName(gid_t gid) {
  std::vector<char> buffer(static_cast<std::size_t>(NameBufferSize(_SC_GETGR_R_SIZE_MAX)));
  group entry{};
  group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    return found->gr_name;
  }
  return absl::StrCat(gid);
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

std::string FormatDurability(const DurabilityStats& durability) {
  if (durability.generation == 0) return "";
  std::string text =
      durability.recording
          ? "durability recording\n"
          : absl::StrCat("durability OFF (",
                         durability.not_recording.empty() ? "the daemon does not say why"
                                                          : durability.not_recording,
                         "): buffers will not outlive this memd\n");
  absl::StrAppend(&text, "generation ", durability.generation);
  if (!durability.recovered && durability.lost_segments > 0) {
    return absl::StrCat(text, ", started EMPTY: the previous state could not be read; ",
                        durability.lost_segments,
                        durability.lost_segments == 1 ? " segment" : " segments",
                        " and their buffers lost (the daemon's log says why)\n");
  }
  if (!durability.recovered) return absl::StrCat(text, ", started from nothing\n");
  // Microseconds: a recovery takes milliseconds, and nanoseconds are noise.
  absl::StrAppend(&text, ", recovered ", FormatLocalTime(durability.recovered_at), " in ",
                  absl::FormatDuration(absl::Trunc(durability.recovery, absl::Microseconds(1))),
                  ": ", durability.adopted_buffers,
                  durability.adopted_buffers == 1 ? " buffer (" : " buffers (",
                  FormatBytes(durability.adopted_bytes), ") in ", durability.adopted_segments,
                  durability.adopted_segments == 1 ? " segment" : " segments", " adopted, ",
                  durability.lost_buffers, " lost\n");
  return text;
}

Json TransferReportJson(const TransferReport& report) {
  Json json;
  json["bytes"] = report.bytes;
  json["seconds"] = absl::ToDoubleSeconds(report.elapsed);
  json["gbps"] = GigabytesPerSecond(report.bytes, report.elapsed);
  json["path"] = report.path;
  json["retries"] = report.retries;
  json["source"] = report.source;
  json["destination"] = report.destination;
  json["file_io"] = report.file_io;
  return json;
}

std::string FormatTransferReport(const TransferReport& report) {
  std::string how = report.path.empty() ? std::string() : report.path;
  if (report.retries > 0) {
    absl::StrAppend(&how, how.empty() ? "" : ", ", report.retries,
                    report.retries == 1 ? " retry" : " retries");
  }
  return absl::StrCat(FormatBytes(report.bytes), " in ",
                      absl::StrFormat("%.2f", absl::ToDoubleSeconds(report.elapsed)), " s, ",
                      FormatRate(GigabytesPerSecond(report.bytes, report.elapsed) * 1e9),
                      how.empty() ? "" : absl::StrCat(" (", how, ")"));
}

Json WithTransferReport(Json json, const TransferReport& report) {
  const Json fields = TransferReportJson(report);  // items() does not own it.
  for (const auto& [key, value] : fields.items()) json[key] = value;
  return json;
}

void PrintJson(std::ostream& out, const Json& json) {
  out << json.dump(2, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace memd::memctl
