// stats, sessions, ping: what the daemon as a whole is doing.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bytes.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/format.h"
#include "tools/memctl/table.h"

namespace memd::memctl {

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
  out << "buffers " << stats->buffers << ", sessions " << stats->sessions
      << ", leases " << stats->leases << "\n\n";

  Table table({{"LOCATION"},
               {"RESERVED", true},
               {"USED", true},
               {"LIMIT", true},
               {"SEGMENTS", true},
               {"HITS", true},
               {"MISSES", true}});
  for (const PoolStats& pool : stats->pools) {
    table.AddRow({pool.location, FormatBytes(pool.reserved_bytes),
                  FormatBytes(pool.used_bytes),
                  pool.limit_bytes == 0 ? "-" : FormatBytes(pool.limit_bytes),
                  absl::StrCat(pool.segments), absl::StrCat(pool.hit_count),
                  absl::StrCat(pool.miss_count)});
  }
  table.Print(out);
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
               {"STARTED"}});
  for (const SessionInfo& session : *sessions) {
    table.AddRow({absl::StrCat(session.id), absl::StrCat(session.pid),
                  UserName(session.uid),
                  session.id == self ? session.command + " (this memctl)"
                                     : session.command,
                  absl::StrCat(session.lease_count), FormatLocalTime(session.started)});
  }
  table.Print(output.out);
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
