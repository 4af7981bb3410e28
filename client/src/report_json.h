#pragma once

// The client library's types as JSON documents: what memctl prints with
// --json and what the C API hands out (memd_stats_json, ...), built once
// here so that the two never drift. snake_case names as the protocol names
// its fields. The names are an interface: scripts and the Python package
// read them, so add fields freely but never rename or drop one.
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
// Nanoseconds since the Unix epoch, as the protocol counts them.
std::int64_t UnixNanos(absl::Time time);

// Fields: name, id, size_bytes, location, owner_uid, owner_gid, mode
// ("0600"), state, persistence, lease_count, unlinked, created_unix_ns,
// sealed_unix_ns (null until sealed), creator_pid, attrs (an object),
// usage (BufferUsageJson).
Json BufferJson(const BufferInfo& info);
// Fields: opens_by_location (an object), opens_by_uid (an object keyed by
// the uid in decimal), lazy_copies, bytes_copied (an object keyed by
// direction), copies_avoided, last_used_unix_ns (0: never).
Json BufferUsageJson(const BufferUsage& usage);
// Fields: subject, action, locations[], evidence, bytes.
Json RecommendationJson(const Recommendation& recommendation);
// Fields: uid, kind, subject, bytes, age_seconds, pid, evidence.
Json LeakJson(const Leak& leak);
// Fields: leaks[] (LeakJson), omitted.
Json LeakReportJson(const LeakReport& report);
// Fields: id, pid, uid, gid, command, lease_count, started_unix_ns,
// created_bytes.
Json SessionJson(const SessionInfo& session);
// Fields: uid, location, bytes, buffers, quota_bytes.
Json UsageJson(const UidUsage& usage);
// Fields: version, backend, socket_dir, started_unix_ns, metrics_address
// ("" when off), buffers, sessions, leases, waits, daemon_wide, pools[]
// (location, reserved_bytes, used_bytes, hit_count, miss_count, free_bytes,
// peak_reserved_bytes, peak_used_bytes, largest_free_block_bytes,
// fragmentation, segments, scrubbed_bytes, trimmed_bytes, limit_bytes,
// size_classes[] of bytes, allocations, cached), devices[] (DeviceJson),
// transfers (TransferStatsJson), durability (DurabilityJson).
Json StatsJson(const DaemonStats& stats, const std::string& socket_dir);
// Fields: ordinal, uuid, name, total_bytes, free_bytes, vmm, posix_fd,
// handle_type, healthy, health_error, api, pci_address, ipc.
Json DeviceJson(const DeviceInfo& device);
// Fields: active, active_bytes, completed, bytes, failed, retries, rejected.
Json TransferStatsJson(const TransferStats& transfers);
// Fields: recording, not_recording, generation, recovered,
// recovered_unix_ns (0 unless recovered), recovery_ns, adopted_segments,
// adopted_buffers, adopted_bytes, lost_buffers, lost_segments.
Json DurabilityJson(const DurabilityStats& durability);
// Fields: location, released_bytes.
Json TrimmedPoolJson(const TrimmedPool& pool);
// Fields: id, state (TransferStateName), bytes_done, bytes_total,
// direction, path, device, retries, error_code (the status code's number,
// 0 when OK), error_message ("" when OK), elapsed_ns.
Json TransferProgressJson(const TransferProgress& progress);

// `json` on one line, UTF-8. Bytes that are not UTF-8 (a process's command
// line may hold any) become U+FFFD instead of an exception, so the text is
// always valid JSON.
std::string DumpJson(const Json& json);

}  // namespace memd::internal
