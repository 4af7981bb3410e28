#pragma once

// The client library's types as JSON documents: what memctl prints with
// --json and what the C API hands out (memd_stats_json, ...), built once
// here so that the two never drift. snake_case names as the protocol names
// its fields. The names are an interface: scripts and the Python package
// read them, so add fields freely but never rename or drop one.
//
// A record with a field table (client/src/record_fields.h) shows its fields
// in the table's order, under the protocol's names; the lists below name
// them for a reader.
//
// Pure functions of their arguments; thread-safe. They throw only what
// nlohmann::json and std::string throw (std::bad_alloc).

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"

namespace memd::internal {

// Keeps fields in the order written, which reads better than sorted.
using Json = nlohmann::ordered_json;

// 0600 -> "0600": permission bits as chmod takes them.
std::string FormatMode(std::uint32_t mode);
// "creating" / "sealed".
std::string StateName(BufferState state);
// "persistent" / "ephemeral".
std::string PersistenceName(Persistence persistence);
// "queued", "running", "done", "failed", "cancelled".
std::string TransferStateName(TransferState state);
// "critical", "normal", "background".
std::string PriorityName(Priority priority);
// Nanoseconds since the Unix epoch, as the protocol counts them.
std::int64_t UnixNanos(absl::Time time);

// Fields: name, id, size_bytes, location, owner_uid, owner_gid, mode
// ("0600"), state, persistence, lease_count, unlinked, created_unix_ns,
// sealed_unix_ns (null until sealed), creator_pid, attrs (an object),
// replicas[] (RecordTable<ReplicaInfo>'s), sync_state, generation,
// fill_failure, usage (BufferUsageJson), placement, retention, numa_node,
// holders (RecordTable<LeaseHolders>'s: listed[] of RecordTable<
// LeaseHolder>'s, unlisted_leases, other_users_leases; empty but for Stat).
Json BufferJson(const BufferInfo& info);
// Fields: opens_by_location (an object), opens_by_uid (an object keyed by
// the uid in decimal), lazy_copies, bytes_copied (an object keyed by
// direction), copies_avoided, last_used_unix_ns (0: never).
Json BufferUsageJson(const BufferUsage& usage);
// Fields: RecordTable<Recommendation>'s (subject, action, locations[], ...).
Json RecommendationJson(const Recommendation& recommendation);
// Fields: RecordTable<Leak>'s (uid, kind, subject, bytes, age_seconds, ...).
Json LeakJson(const Leak& leak);
// Fields: leaks[] (LeakJson), omitted.
Json LeakReportJson(const LeakReport& report);
// Fields: RecordTable<SessionInfo>'s (id, pid, uid, ..., started_unix_ns,
// ...).
Json SessionJson(const SessionInfo& session);
// Fields: RecordTable<UidUsage>'s (uid, location, bytes, ...).
Json UsageJson(const UidUsage& usage);
// Fields: version, backend, socket_dir, started_unix_ns, metrics_address
// ("" when off), buffers, sessions, leases, waits, daemon_wide, pools[]
// (RecordTable<PoolStats>'s: location, reserved_bytes, ..., size_classes[]
// of RecordTable<SizeClassStats>'s), devices[] (DeviceJson), transfers
// (TransferStatsJson), durability (DurabilityJson), memory_waits[]
// (RecordTable<MemoryWaits>'s).
Json StatsJson(const DaemonStats& stats, const std::string& socket_dir);
// Fields: RecordTable<DeviceInfo>'s (ordinal, uuid, name, ...).
Json DeviceJson(const DeviceInfo& device);
// Fields: RecordTable<TransferStats>'s (active, active_bytes, ...).
Json TransferStatsJson(const TransferStats& transfers);
// Fields: RecordTable<DurabilityStats>'s (recording, ..., recovered_unix_ns
// (0 unless recovered), recovery_ns, ...).
Json DurabilityJson(const DurabilityStats& durability);
// Fields: location, released_bytes.
Json TrimmedPoolJson(const TrimmedPool& pool);
// Fields: id, state (TransferStateName), bytes_done, bytes_total,
// direction, path, device, retries, error_code (the status code's number,
// 0 when OK), error_message ("" when OK), elapsed_ns.
Json TransferProgressJson(const TransferProgress& progress);

// Fields: RecordTable<TransferInfo>'s (progress (TransferProgressJson),
// priority (PriorityName), source_name, ..., age_ns, session_id, pid, uid,
// command).
Json TransferInfoJson(const TransferInfo& transfer);
// Fields: RecordTable<TransferList>'s (transfers[] (TransferInfoJson),
// omitted).
Json TransferListJson(const TransferList& list);

// `json` on one line, UTF-8. Bytes that are not UTF-8 (a process's command
// line may hold any) become U+FFFD instead of an exception, so the text is
// always valid JSON.
std::string DumpJson(const Json& json);

}  // namespace memd::internal
