#pragma once

#include <tuple>

#include "memd/client.h"
#include "tests/support/struct_fields.h"

// The public structs of memd/client.h, field by field (tests/support/
// struct_fields.h). A line here stops compiling when its struct gains a
// field: read the field in client/src/convert.cc's FromProto, show it in
// memctl's JSON (tools/memctl/format.cc), then name it here.
namespace memd::test {
template <>
struct Fields<SizeClassStats> {
  static auto Of(auto& s) {
    auto& [bytes, allocations, cached] = s;
    return std::tie(bytes, allocations, cached);
  }
};
template <>
struct Fields<PoolStats> {
  static auto Of(auto& s) {
    auto& [location, reserved_bytes, used_bytes, free_bytes, peak_reserved_bytes,
           peak_used_bytes, hit_count, miss_count, largest_free_block_bytes, fragmentation,
           segments, scrubbed_bytes, trimmed_bytes, limit_bytes, size_classes, evictions,
           evicted_bytes, demotions, demoted_bytes] = s;
    return std::tie(location, reserved_bytes, used_bytes, free_bytes, peak_reserved_bytes,
                    peak_used_bytes, hit_count, miss_count, largest_free_block_bytes,
                    fragmentation, segments, scrubbed_bytes, trimmed_bytes, limit_bytes,
                    size_classes, evictions, evicted_bytes, demotions, demoted_bytes);
  }
};
template <>
struct Fields<DeviceInfo> {
  static auto Of(auto& s) {
    auto& [ordinal, uuid, name, total_bytes, free_bytes, vmm, posix_fd, handle_type,
           healthy, health_error, api, pci_address, ipc, has_free, memd_bytes,
           outside_memd_bytes] = s;
    return std::tie(ordinal, uuid, name, total_bytes, free_bytes, vmm, posix_fd,
                    handle_type, healthy, health_error, api, pci_address, ipc, has_free,
                    memd_bytes, outside_memd_bytes);
  }
};
template <>
struct Fields<TransferStats> {
  static auto Of(auto& s) {
    auto& [active, active_bytes, completed, bytes, failed, retries, rejected] = s;
    return std::tie(active, active_bytes, completed, bytes, failed, retries, rejected);
  }
};
template <>
struct Fields<DurabilityStats> {
  static auto Of(auto& s) {
    auto& [recording, not_recording, generation, recovered, recovered_at, recovery,
           adopted_segments, adopted_buffers, adopted_bytes, lost_buffers, lost_segments] = s;
    return std::tie(recording, not_recording, generation, recovered, recovered_at, recovery,
                    adopted_segments, adopted_buffers, adopted_bytes, lost_buffers,
                    lost_segments);
  }
};
template <>
struct Fields<DaemonStats> {
  static auto Of(auto& s) {
    auto& [version, backend, pools, buffers, sessions, leases, metrics_address, started,
           devices, waits, transfers, daemon_wide, durability, memory_waits] = s;
    return std::tie(version, backend, pools, buffers, sessions, leases, metrics_address,
                    started, devices, waits, transfers, daemon_wide, durability, memory_waits);
  }
};
template <>
struct Fields<MemoryWaits> {
  static auto Of(auto& s) {
    auto& [location, creates, bytes] = s;
    return std::tie(location, creates, bytes);
  }
};
template <>
struct Fields<TransferProgress> {
  static auto Of(auto& s) {
    auto& [id, state, bytes_done, bytes_total, direction, path, device, retries, status,
           elapsed] = s;
    return std::tie(id, state, bytes_done, bytes_total, direction, path, device, retries,
                    status, elapsed);
  }
};
template <>
struct Fields<ReplicaInfo> {
  static auto Of(auto& s) {
    auto& [location, state, generation, readers, writers, bytes, charged_uid] = s;
    return std::tie(location, state, generation, readers, writers, bytes, charged_uid);
  }
};
template <>
struct Fields<BufferInfo> {
  static auto Of(auto& s) {
    auto& [name, id, size, location, owner_uid, owner_gid, mode, state, persistence,
           lease_count, unlinked, created, sealed, creator_pid, attrs, replicas, sync_state,
           generation, fill_failure, usage, placement, retention, numa_node] = s;
    return std::tie(name, id, size, location, owner_uid, owner_gid, mode, state,
                    persistence, lease_count, unlinked, created, sealed, creator_pid, attrs,
                    replicas, sync_state, generation, fill_failure, usage, placement,
                    retention, numa_node);
  }
};
template <>
struct Fields<BufferUsage> {
  static auto Of(auto& s) {
    auto& [opens_by_location, opens_by_uid, lazy_copies, bytes_copied, copies_avoided,
           last_used] = s;
    return std::tie(opens_by_location, opens_by_uid, lazy_copies, bytes_copied,
                    copies_avoided, last_used);
  }
};
template <>
struct Fields<Recommendation> {
  static auto Of(auto& s) {
    auto& [subject, action, locations, evidence, bytes] = s;
    return std::tie(subject, action, locations, evidence, bytes);
  }
};
template <>
struct Fields<LeaksOptions> {
  static auto Of(auto& s) {
    auto& [older_than, many_leases] = s;
    return std::tie(older_than, many_leases);
  }
};
template <>
struct Fields<Leak> {
  static auto Of(auto& s) {
    auto& [uid, kind, subject, bytes, age, pid, evidence] = s;
    return std::tie(uid, kind, subject, bytes, age, pid, evidence);
  }
};
template <>
struct Fields<LeakReport> {
  static auto Of(auto& s) {
    auto& [leaks, omitted] = s;
    return std::tie(leaks, omitted);
  }
};
template <>
struct Fields<SessionInfo> {
  static auto Of(auto& s) {
    auto& [id, pid, uid, gid, command, lease_count, started, created_bytes] = s;
    return std::tie(id, pid, uid, gid, command, lease_count, started, created_bytes);
  }
};
template <>
struct Fields<UidUsage> {
  static auto Of(auto& s) {
    auto& [uid, location, bytes, buffers, quota_bytes] = s;
    return std::tie(uid, location, bytes, buffers, quota_bytes);
  }
};
}  // namespace memd::test
