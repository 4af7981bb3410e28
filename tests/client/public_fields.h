#pragma once

#include <tuple>

#include "client/src/record_fields.h"
#include "memd/client.h"
#include "tests/support/struct_fields.h"

// The public structs of memd/client.h, field by field (tests/support/
// struct_fields.h).
//
// A record with a table (client/src/record_fields.h) has its fields in the
// table's order, and stops compiling here when it gains a member the table
// does not name: add the member to the table.
//
// The others are listed below; a line stops compiling when its struct gains
// a field: read the field in client/src/convert.cc's FromProto, show it in
// client/src/report_json.cc, then name it here.
namespace memd::test {
template <internal::HasRecordTable Record>
struct Fields<Record> {
  static constexpr auto& kTable = internal::RecordTable<Record>::kFields;
  static_assert(AggregateFieldCount<Record>() ==
                    std::tuple_size_v<std::remove_cvref_t<decltype(kTable)>>,
                "a member of this record is missing from its table in "
                "client/src/record_fields.h");
  static auto Of(auto& s) {
    return std::apply([&](const auto&... field) { return std::tie(s.*field.member...); },
                      kTable);
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
struct Fields<TransferProgress> {
  static auto Of(auto& s) {
    auto& [id, state, bytes_done, bytes_total, direction, path, device, retries, status,
           elapsed] = s;
    return std::tie(id, state, bytes_done, bytes_total, direction, path, device, retries,
                    status, elapsed);
  }
};
template <>
struct Fields<BufferInfo> {
  static auto Of(auto& s) {
    auto& [name, id, size, location, owner_uid, owner_gid, mode, state, persistence,
           lease_count, unlinked, created, sealed, creator_pid, attrs, replicas, sync_state,
           generation, fill_failure, usage, placement, retention, numa_node, holders] = s;
    return std::tie(name, id, size, location, owner_uid, owner_gid, mode, state,
                    persistence, lease_count, unlinked, created, sealed, creator_pid, attrs,
                    replicas, sync_state, generation, fill_failure, usage, placement,
                    retention, numa_node, holders);
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
struct Fields<ListOptions> {
  static auto Of(auto& s) {
    auto& [include_unlinked] = s;
    return std::tie(include_unlinked);
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
struct Fields<LeakReport> {
  static auto Of(auto& s) {
    auto& [leaks, omitted] = s;
    return std::tie(leaks, omitted);
  }
};
}  // namespace memd::test
