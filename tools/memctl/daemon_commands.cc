// stats, sessions, transfers, usage, advise, leaks, ping: what the daemon as a
// whole is doing.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/bytes.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/format.h"
#include "tools/memctl/table.h"

namespace memd::memctl {

using internal::PriorityName;       // "critical", "normal", "background"
using internal::TransferListJson;
using internal::TransferStateName;  // "queued", "running", ...

namespace {

// NAME@LOCATION, and +OFFSET when the range starts past the first byte.
std::string CopyEnd(const std::string& name, const std::string& location,
                    std::uint64_t offset) {
  std::string end = absl::StrCat(name, "@", location);
  if (offset != 0) absl::StrAppend(&end, "+", offset);
  return end;
}

// memd's share of a GPU beside everything else the driver counts used.
std::string DeviceMemoryLine(const DeviceInfo& device) {
  std::string line = absl::StrCat("memd holds ", FormatBytes(device.memd_bytes));
  if (device.has_free) {
    absl::StrAppend(&line, ", outside memd ", FormatBytes(device.outside_memd_bytes),
                    " (other processes, drivers' contexts, clients' imports of memory memd "
                    "gave back)");
  } else {
    absl::StrAppend(&line, "; the driver reports no free memory");
  }
  return line;
}

}  // namespace

absl::Status RunStats(Client& client, const Output& output) {
  absl::StatusOr<DaemonStats> stats = client.Stats();
  if (!stats.ok()) return Failed("stats", stats.status());
  if (output.json) {
    PrintJson(output.out, StatsJson(*stats, client.socket_dir()));
    return absl::OkStatus();
  }
  std::ostream& out = output.out;
  out << "memd " << stats->version << " (backend " << stats->backend << ") at "
      << client.socket_dir() << '\n';
  out << "started  " << FormatLocalTime(stats->started) << " (up "
      << FormatAge(absl::Now() - stats->started) << ")\n";
  out << "metrics  "
      << (stats->metrics_address.empty() ? "off" : stats->metrics_address) << '\n';
  out << FormatDurability(stats->durability);
  // A user's own figures unless root asks: others' activity is theirs.
  if (!stats->daemon_wide) out << "your uid's: ";
  out << "buffers " << stats->buffers << ", sessions " << stats->sessions
      << ", leases " << stats->leases << ", waiting calls " << stats->waits << "\n";
  if (!stats->memory_waits.empty()) {
    out << "waiting for memory:";
    const char* separator = " ";
    for (const MemoryWaits& waits : stats->memory_waits) {
      out << separator << waits.location << " " << waits.calls
          << (waits.calls == 1 ? " call" : " calls") << " for "
          << FormatBytes(waits.bytes);
      separator = "; ";
    }
    out << '\n';
  }
  for (const DeviceInfo& device : stats->devices) {
    out << "device:" << device.ordinal << "  " << device.name << " (" << device.api << "), ";
    if (device.has_free) out << FormatBytes(device.free_bytes) << " free of ";
    out << FormatBytes(device.total_bytes) << ", " << device.handle_type << " handles\n";
    out << "          " << DeviceMemoryLine(device) << '\n';
  }
  out << '\n';

  Table table({{"LOCATION"},
               {"RESERVED", true},
               {"USED", true},
               {"PEAK", true},
               {"LARGEST FREE", true},
               {"FRAG", true},
               {"SEGMENTS", true},
               {"HITS", true},
               {"MISSES", true},
               {"HIT%", true},
               {"LIMIT", true}});
  for (const PoolStats& pool : stats->pools) {
    const std::uint64_t requests = pool.hit_count + pool.miss_count;
    table.AddRow({pool.location, FormatBytes(pool.reserved_bytes),
                  FormatBytes(pool.used_bytes), FormatBytes(pool.peak_reserved_bytes),
                  FormatBytes(pool.largest_free_block_bytes),
                  absl::StrFormat("%.2f", pool.fragmentation),
                  absl::StrCat(pool.segments), absl::StrCat(pool.hit_count),
                  absl::StrCat(pool.miss_count),
                  requests == 0 ? "-"
                                : absl::StrFormat("%.1f", 100.0 * pool.hit_count / requests),
                  pool.limit_bytes == 0 ? "-" : FormatBytes(pool.limit_bytes)});
  }
  table.Print(out);
  for (const PoolStats& pool : stats->pools) {
    if (pool.scrubbed_bytes > 0 || pool.trimmed_bytes > 0) {
      out << pool.location << ": scrubbed " << FormatBytes(pool.scrubbed_bytes)
          << ", trimmed " << FormatBytes(pool.trimmed_bytes) << " since start\n";
    }
    if (pool.evictions > 0 || pool.demotions > 0) {
      out << pool.location << ": under pressure since start, evicted " << pool.evictions
          << (pool.evictions == 1 ? " buffer (" : " buffers (") << FormatBytes(pool.evicted_bytes)
          << "), demoted " << pool.demotions << (pool.demotions == 1 ? " copy (" : " copies (")
          << FormatBytes(pool.demoted_bytes) << ")\n";
    }
  }
  return absl::OkStatus();
}

absl::Status RunDevices(Client& client, const Output& output) {
  absl::StatusOr<DaemonStats> stats = client.Stats();
  if (!stats.ok()) return Failed("devices", stats.status());
  if (output.json) {
    Json json = Json::array();
    for (const DeviceInfo& device : stats->devices) json.push_back(DeviceJson(device));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  if (stats->devices.empty()) {
    output.out << "no GPU: memd runs the " << stats->backend << " backend\n";
    return absl::OkStatus();
  }
  Table table({{"DEVICE"}, {"API"}, {"NAME"}, {"UUID"}, {"PCI"}, {"TOTAL", true},
               {"FREE", true}, {"MEMD", true}, {"OUTSIDE MEMD", true}, {"VMM"},
               {"FD EXPORT"}, {"HANDLES"}, {"HEALTH"}});
  for (const DeviceInfo& device : stats->devices) {
    const bool cuda = device.api == "cuda";
    table.AddRow({absl::StrCat("device:", device.ordinal), device.api, device.name,
                  device.uuid, device.pci_address.empty() ? "-" : device.pci_address,
                  FormatBytes(device.total_bytes),
                  // Level Zero 1.4 has no free-memory query outside Sysman.
                  device.has_free ? FormatBytes(device.free_bytes) : "-",
                  FormatBytes(device.memd_bytes),
                  device.has_free ? FormatBytes(device.outside_memd_bytes) : "-",
                  cuda ? (device.vmm ? "yes" : "no") : "-",
                  cuda ? (device.posix_fd ? "yes" : "no") : "-", device.handle_type,
                  device.healthy ? "ok" : "UNHEALTHY"});
  }
  table.Print(output.out);
  // The reason is long (a driver call and its CUresult): under the table.
  for (const DeviceInfo& device : stats->devices) {
    if (device.healthy) continue;
    output.out << "device:" << device.ordinal << " unhealthy until memd restarts: "
               << device.health_error << '\n';
  }
  return absl::OkStatus();
}

absl::Status RunTrim(Client& client, const std::string& location,
                     const Output& output) {
  absl::StatusOr<std::vector<TrimmedPool>> trimmed = client.Trim(location);
  if (!trimmed.ok()) {
    return Failed(location.empty() ? "trim" : absl::StrCat("trim ", location),
                  trimmed.status());
  }
  if (output.json) {
    Json json = Json::array();
    for (const TrimmedPool& pool : *trimmed) json.push_back(TrimmedPoolJson(pool));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  for (const TrimmedPool& pool : *trimmed) {
    output.out << pool.location << ": gave back " << FormatBytes(pool.released_bytes);
    if (pool.driver_freed_bytes.has_value()) {
      output.out << "; the driver's free memory rose by "
                 << FormatBytes(*pool.driver_freed_bytes);
      if (*pool.driver_freed_bytes < pool.released_bytes) {
        // The usual reason: a client still maps what memd let go of.
        output.out << " (the rest is still counted used: clients' imports hold it, or "
                      "another process allocated meanwhile)";
      }
    }
    output.out << '\n';
  }
  return absl::OkStatus();
}

absl::Status RunStatsWatch(Client& client, absl::Duration every, int count,
                           const Output& output, bool terminal) {
  std::ostream& out = output.out;
  for (int frame = 0; count == 0 || frame < count; ++frame) {
    if (frame > 0) absl::SleepFor(every);
    absl::StatusOr<DaemonStats> stats = client.Stats();
    if (!stats.ok()) return Failed("stats", stats.status());
    if (output.json) {
      // JSON Lines: one object per view, stamped with when it was taken.
      Json view = StatsJson(*stats, client.socket_dir());
      view["time_unix_ns"] = absl::ToUnixNanos(absl::Now());
      out << view.dump(-1, ' ', false, Json::error_handler_t::replace) << std::endl;
      continue;
    }
    if (terminal) out << "\033[H\033[2J";  // Home, clear: redraw in place.
    out << "memd " << stats->version << " " << stats->backend << "  "
        << FormatLocalTime(absl::Now()) << "  buffers " << stats->buffers
        << "  sessions " << stats->sessions << "  leases " << stats->leases << '\n';
    Table table({{"LOCATION"}, {"USED", true}, {"RESERVED", true}, {"PEAK", true},
                 {"HIT%", true}, {"FRAG", true}, {"LIMIT", true}});
    for (const PoolStats& pool : stats->pools) {
      const std::uint64_t requests = pool.hit_count + pool.miss_count;
      table.AddRow({pool.location, FormatBytes(pool.used_bytes),
                    FormatBytes(pool.reserved_bytes), FormatBytes(pool.peak_reserved_bytes),
                    requests == 0 ? "-"
                                  : absl::StrFormat("%.1f", 100.0 * pool.hit_count / requests),
                    absl::StrFormat("%.2f", pool.fragmentation),
                    FormatBytes(pool.limit_bytes)});
    }
    table.Print(out);
    out << std::endl;
  }
  return absl::OkStatus();
}

absl::Status RunSessions(Client& client, const Output& output) {
  absl::StatusOr<std::vector<SessionInfo>> sessions = client.Sessions();
  if (!sessions.ok()) return Failed("sessions", sessions.status());
  std::sort(sessions->begin(), sessions->end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.id < b.id; });
  if (output.json) {
    Json json = Json::array();
    for (const SessionInfo& session : *sessions) json.push_back(SessionJson(session));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  // memctl always shows up here itself; mark it so nobody hunts for it.
  const std::uint64_t self = client.session_id();
  Table table({{"ID", true},
               {"PID", true},
               {"USER"},
               {"COMMAND"},
               {"LEASES", true},
               {"CREATED", true},
               {"STARTED"}});
  for (const SessionInfo& session : *sessions) {
    table.AddRow({absl::StrCat(session.id), absl::StrCat(session.pid),
                  UserName(session.uid),
                  session.id == self ? session.command + " (this memctl)"
                                     : session.command,
                  absl::StrCat(session.lease_count), FormatBytes(session.created_bytes),
                  FormatLocalTime(session.started)});
  }
  table.Print(output.out);
  return absl::OkStatus();
}

absl::Status RunUsage(Client& client, const Output& output) {
  absl::StatusOr<std::vector<UidUsage>> usage = client.Usage();
  if (!usage.ok()) return Failed("usage", usage.status());
  if (output.json) {
    Json json = Json::array();
    for (const UidUsage& entry : *usage) json.push_back(UsageJson(entry));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  Table table({{"USER"}, {"LOCATION"}, {"BUFFERS", true}, {"BYTES", true},
               {"QUOTA", true}, {"USE%", true}});
  for (const UidUsage& entry : *usage) {
    const bool quota = entry.quota_bytes != 0;
    table.AddRow({UserName(entry.uid), entry.location, absl::StrCat(entry.buffers),
                  FormatBytes(entry.bytes), quota ? FormatBytes(entry.quota_bytes) : "-",
                  quota ? absl::StrFormat("%.1f", 100.0 * static_cast<double>(entry.bytes) /
                                                      static_cast<double>(entry.quota_bytes))
                        : "-"});
  }
  table.Print(output.out);
  return absl::OkStatus();
}

absl::Status RunAdvise(Client& client, const std::string& prefix, const Output& output) {
  absl::StatusOr<std::vector<Recommendation>> advice = client.Advise(prefix);
  if (!advice.ok()) return Failed("advise", advice.status());
  if (output.json) {
    Json json = Json::array();
    for (const Recommendation& r : *advice) json.push_back(RecommendationJson(r));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  if (advice->empty()) {
    output.out << (prefix.empty() ? std::string("no advice")
                                  : absl::StrCat("no advice for ", prefix, "*"))
               << '\n';
    return absl::OkStatus();
  }
  for (const Recommendation& r : *advice) output.out << FormatRecommendation(r) << '\n';
  return absl::OkStatus();
}

absl::Status RunLeaks(Client& client, const LeaksOptions& options, const Output& output) {
  absl::StatusOr<LeakReport> report = client.Leaks(options);
  if (!report.ok()) return Failed("leaks", report.status());
  if (output.json) {
    PrintJson(output.out, LeakReportJson(*report));
    return absl::OkStatus();
  }
  PrintLeaks(output.out, *report, options);
  return absl::OkStatus();
}

absl::Status RunTransfers(Client& client, const Output& output) {
  absl::StatusOr<TransferList> list = client.Transfers();
  if (!list.ok()) return Failed("transfers", list.status());
  if (output.json) {
    PrintJson(output.out, TransferListJson(*list));
    return absl::OkStatus();
  }
  if (list->transfers.empty() && list->omitted == 0) {
    output.out << "no copies queued or running\n";
    return absl::OkStatus();
  }
  Table table({{"ID", true},
               {"STATE"},
               {"PRIORITY"},
               {"SOURCE"},
               {"DESTINATION"},
               {"DIRECTION"},
               {"DONE", true},
               {"AGE", true},
               {"USER"},
               {"PID", true},
               {"COMMAND"}});
  for (const TransferInfo& transfer : list->transfers) {
    const TransferProgress& progress = transfer.progress;
    const std::string done = absl::StrCat(
        FormatBytes(progress.bytes_done), " of ", FormatBytes(progress.bytes_total),
        progress.bytes_total == 0
            ? ""
            : absl::StrFormat(" (%.0f%%)", 100.0 * static_cast<double>(progress.bytes_done) /
                                                static_cast<double>(progress.bytes_total)));
    table.AddRow(
        {absl::StrCat(progress.id), TransferStateName(progress.state),
         PriorityName(transfer.priority),
         CopyEnd(transfer.source_name, transfer.source_location, transfer.source_offset),
         CopyEnd(transfer.destination_name, transfer.destination_location,
                 transfer.destination_offset),
         progress.device < 0 ? progress.direction
                             : absl::StrCat(progress.direction, " on device:", progress.device),
         done, FormatAge(transfer.age), UserName(transfer.uid),
         transfer.pid == 0 ? "-" : absl::StrCat(transfer.pid),
         transfer.command.empty() ? "-" : transfer.command});
  }
  table.Print(output.out);
  if (list->omitted > 0) output.out << list->omitted << " more not shown\n";
  return absl::OkStatus();
}

absl::Status RunPing(Client& client, const Output& output) {
  const absl::Time start = absl::Now();
  if (absl::Status status = client.Ping(); !status.ok()) return Failed("ping", status);
  const absl::Duration round_trip = absl::Now() - start;
  if (output.json) {
    Json json;
    json["socket_dir"] = client.socket_dir();
    json["session_id"] = client.session_id();
    json["round_trip_ns"] = absl::ToInt64Nanoseconds(round_trip);
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  output.out << "memd at " << client.socket_dir() << " answered in "
             << absl::FormatDuration(absl::Trunc(round_trip, absl::Microseconds(1)))
             << '\n';
  return absl::OkStatus();
}

}  // namespace memd::memctl
