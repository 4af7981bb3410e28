#pragma once

// How memctl shows the client library's types: words and units for humans,
// snake_case JSON for scripts. The JSON field names are an interface: scripts
// depend on them, so add fields freely but never rename or drop one.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"

namespace memd::memctl {

// Keeps fields in the order written, which reads better than sorted.
using Json = nlohmann::ordered_json;

// 0600 -> "0600": permission bits as chmod takes them.
std::string FormatMode(std::uint32_t mode);
// "creating" / "sealed".
std::string StateName(BufferState state);
// "persistent" / "ephemeral".
std::string PersistenceName(Persistence persistence);
// Local time to the second, "2024-05-01 12:00:00 CEST"; "-" for the Unix
// epoch, which the daemon sends for "never".
std::string FormatLocalTime(absl::Time time);
// "3h12m5s": a duration rounded down to whole seconds.
std::string FormatAge(absl::Duration age);
// The user's name, else the number.
std::string UserName(uid_t uid);
// A uid from a number or a user name; std::nullopt when it is neither.
std::optional<uid_t> ParseUser(const std::string& text);
std::string GroupName(gid_t gid);

// Nanoseconds since the Unix epoch, as the protocol counts them.
std::int64_t UnixNanos(absl::Time time);

// Fields: name, id, size_bytes, location, owner_uid, owner_gid, mode
// ("0600"), state, persistence, lease_count, unlinked, created_unix_ns,
// sealed_unix_ns (null until sealed), creator_pid.
Json BufferJson(const BufferInfo& info);
// Fields: id, pid, uid, gid, command, lease_count, started_unix_ns.
Json SessionJson(const SessionInfo& session);
Json UsageJson(const UidUsage& usage);
// Fields: version, backend, socket_dir, started_unix_ns, metrics_address
// ("" when off), buffers, sessions, leases, pools[] (location,
// reserved_bytes, used_bytes, hit_count, miss_count, segments, limit_bytes).
Json StatsJson(const DaemonStats& stats, const std::string& socket_dir);
Json DeviceJson(const DeviceInfo& device);
// Fields: active, active_bytes, completed, bytes, failed, retries, rejected.
Json TransferStatsJson(const TransferStats& transfers);
// Fields: recording, not_recording, generation, recovered,
// recovered_unix_ns (0 unless recovered), recovery_ns, adopted_segments,
// adopted_buffers, adopted_bytes, lost_buffers, lost_segments.
Json DurabilityJson(const DurabilityStats& durability);
// Two lines for `memctl stats`: whether buffers outlive the daemon (and why
// not), then its generation and what its start took back, e.g.
//   durability recording
//   generation 3, recovered 2026-11-26 05:03:26 UTC in 2.4ms: 4 buffers
//   (7.1 MiB) in 4 segments adopted, 0 lost
// (one line). Empty from a daemon too old to say (generation 0).
std::string FormatDurability(const DurabilityStats& durability);

// What one copy did (cp; put and get of a buffer), as --json reports it.
struct TransferReport {
  std::string source;       // As given: a buffer name, a path, "-".
  std::string destination;
  std::uint64_t bytes = 0;
  absl::Duration elapsed;   // From the first byte read or copied to the last.
  // TransferProgress::path of the daemon's copies ("direct", "staged",
  // "cpu", ...); "cpu" too when memctl read or wrote a host buffer's
  // mapping itself.
  std::string path;
  std::uint32_t retries = 0;  // Chunks the daemon tried again.
  // How memctl read a file: "direct" (O_DIRECT), "buffered"; empty when no
  // file was read.
  std::string file_io;
};
// Fields: bytes, seconds, gbps (decimal GB/s), path, retries, source,
// destination, file_io.
Json TransferReportJson(const TransferReport& report);
// "5 MiB in 1.20 s, 4.37 MB/s (direct, 2 retries)": how a copy went.
std::string FormatTransferReport(const TransferReport& report);
// `json` with TransferReportJson's fields added.
Json WithTransferReport(Json json, const TransferReport& report);

// Writes `json` indented, then a newline. Bytes that are not UTF-8 (a
// process name may hold any) become U+FFFD instead of an exception.
void PrintJson(std::ostream& out, const Json& json);

}  // namespace memd::memctl
