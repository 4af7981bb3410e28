#pragma once

// How memctl shows the client library's types: words and units for humans,
// snake_case JSON for scripts. The JSON field names are an interface: scripts
// depend on them, so add fields freely but never rename or drop one.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "client/src/report_json.h"
#include "memd/client.h"

namespace memd::memctl {

// The JSON documents of the client library's types live in libmemd
// (client/src/report_json.h), which hands the same documents out through
// its C API; memctl prints them. Here under their memctl names.
using internal::Json;
using internal::FormatMode;       // 0600 -> "0600"
using internal::StateName;        // "creating" / "sealed"
using internal::PersistenceName;  // "persistent" / "ephemeral"
using internal::UnixNanos;
using internal::BufferJson;
using internal::SessionJson;
using internal::UsageJson;
using internal::StatsJson;
using internal::DeviceJson;
using internal::TransferStatsJson;
using internal::DurabilityJson;
using internal::TrimmedPoolJson;
using internal::BufferUsageJson;
using internal::RecommendationJson;
using internal::LeakJson;
using internal::LeakReportJson;

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

// One line of `memctl advise`: the subject, the evidence, then what to do,
//   weights/llama/: 2 buffers, opened 412 times on device:0 and device:1,
//   lives on host, 96 GiB copied in the last hour -> prefetch to
//   device:0,device:1 (96 GiB to copy)
// (one line); drop_replica and unlink say the bytes they free.
std::string FormatRecommendation(const Recommendation& recommendation);

// `memctl leaks`: a table of UID, KIND, SUBJECT, BYTES, AGE, PID and
// EVIDENCE ("-" where a figure does not apply or memd does not know it),
// then "N more not shown" when the daemon left some out; one line saying
// there are none, with the rules, when the report is empty.
void PrintLeaks(std::ostream& out, const LeakReport& report, const LeaksOptions& options);

// The rows `memctl inspect` shows of a buffer's usage counters, as (field,
// value): opens by location and by user, copies, copies avoided, last use.
std::vector<std::pair<std::string, std::string>> UsageRows(const BufferUsage& usage);

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
  // How memctl read a file: "direct" (O_DIRECT), "buffered", "sendfile"
  // (into a host buffer through its descriptor); empty when no file was read.
  std::string file_io;
};
// Fields: bytes, seconds, gb_per_s (decimal gigabytes, 10^9 bytes, per
// second: not gigabits, not GiB), path, retries, source,
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
