#pragma once

// The records of memd/records.h that mirror one protocol message, each
// written once: a table of its fields in the order the JSON shows them,
// which both FromProto (client/src/convert.cc) and the JSON writers
// (client/src/report_json.cc) walk. A new statistic in such a message is one
// line here (and its member in memd/records.h); as daemon/config.cc lists
// its options, by member pointer.
//
// Each entry is one member of the record:
// - Plain: the message's field of the same name, read by its getter (a
//   value that would narrow into the member does not compile) and shown as
//   it is; tests/client/record_fields_test.cc checks each one end to end.
// - ByHand: a member that needs code, listed where it shows: an enum or
//   nanoseconds made into a name or an absl::Time, a repeated field, a
//   value derived from another (DeviceInfo::healthy).
// That test fails, naming the field, when the message has a field no entry
// names; tests/client/public_fields.h fails to compile when the record has a
// member no entry names.
//
// Records that stay written out by hand, field by field, in convert.cc and
// report_json.cc: BufferInfo (mode, state, sealed, attrs, replicas, usage,
// holders),
// BufferUsage (maps), TransferProgress (its id and status are named
// otherwise in the protocol), LeakReport, TrimmedPool and DaemonStats
// (records of records; their scalars a few lines each).
//
// Tables of constants; thread-safe.

#include <sys/types.h>

#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/time/time.h"
#include "client/src/report_json.h"
#include "memd/client.h"
#include "memd/v1/memd.pb.h"

namespace memd::internal {

// Shows a member's value as it is.
struct AsIs {
  template <typename T>
  const T& operator()(const T& value) const {
    return value;
  }
};

template <typename Record, typename T, typename Read, typename Show>
struct RecordField {
  const char* name;  // The JSON key; for a Plain entry the message's field too.
  T Record::*member;
  Read read;  // A getter of the message, or a function of the message.
  Show show;  // The member's value -> its JSON.
  static constexpr bool kPlain = std::is_member_function_pointer_v<Read>;
};

template <typename Record, typename T, typename Message, typename Value>
constexpr auto Plain(const char* name, T Record::*member, Value (Message::*get)() const) {
  return RecordField<Record, T, Value (Message::*)() const, AsIs>{name, member, get, {}};
}

template <typename Record, typename T, typename Read, typename Show = AsIs>
constexpr auto ByHand(const char* name, T Record::*member, Read read, Show show = {}) {
  return RecordField<Record, T, Read, Show>{name, member, read, show};
}

// Specialised below per record: `using Message`, and `kFields`, a tuple of
// Plain and ByHand entries, one per member of the record.
template <typename Record>
struct RecordTable;

template <typename Record>
concept HasRecordTable = requires { RecordTable<Record>::kFields; };

template <HasRecordTable Record>
Record FromTable(const typename RecordTable<Record>::Message& message) {
  Record record;
  std::apply(
      [&](const auto&... field) {
        auto read = [&](const auto& field) {
          using T = std::remove_reference_t<decltype(record.*field.member)>;
          if constexpr (std::decay_t<decltype(field)>::kPlain) {
            record.*field.member = T{(message.*field.read)()};
          } else {
            record.*field.member = field.read(message);
          }
        };
        (read(field), ...);
      },
      RecordTable<Record>::kFields);
  return record;
}

template <HasRecordTable Record>
Json TableJson(const Record& record) {
  Json json = Json::object();
  std::apply(
      [&](const auto&... field) { ((json[field.name] = field.show(record.*field.member)), ...); },
      RecordTable<Record>::kFields);
  return json;
}

// A repeated message field as records of their table, and those records
// as a JSON array: a ByHand entry's read and show for a list of records.
template <HasRecordTable Record, typename Items>
std::vector<Record> FromTables(const Items& items) {
  std::vector<Record> records;
  for (const auto& item : items) records.push_back(FromTable<Record>(item));
  return records;
}

template <HasRecordTable Record>
Json TablesJson(const std::vector<Record>& records) {
  Json json = Json::array();
  for (const Record& record : records) json.push_back(TableJson(record));
  return json;
}

inline std::string HandleTypeName(v1::HandleType type) {
  switch (type) {
    case v1::CUDA_IPC: return "ipc";
    case v1::LEVEL_ZERO_IPC: return "level_zero_ipc";
    default: return "vmm_fd";
  }
}

template <>
struct RecordTable<SizeClassStats> {
  using R = SizeClassStats;
  using Message = v1::SizeClassStats;
  static constexpr auto kFields = std::tuple{
      Plain("bytes", &R::bytes, &Message::bytes),
      Plain("allocations", &R::allocations, &Message::allocations),
      Plain("cached", &R::cached, &Message::cached),
  };
};

template <>
struct RecordTable<PoolStats> {
  using R = PoolStats;
  using Message = v1::PoolStats;
  static constexpr auto kFields = std::tuple{
      Plain("location", &R::location, &Message::location),
      Plain("reserved_bytes", &R::reserved_bytes, &Message::reserved_bytes),
      Plain("used_bytes", &R::used_bytes, &Message::used_bytes),
      Plain("hit_count", &R::hit_count, &Message::hit_count),
      Plain("miss_count", &R::miss_count, &Message::miss_count),
      Plain("free_bytes", &R::free_bytes, &Message::free_bytes),
      Plain("peak_reserved_bytes", &R::peak_reserved_bytes, &Message::peak_reserved_bytes),
      Plain("peak_used_bytes", &R::peak_used_bytes, &Message::peak_used_bytes),
      Plain("largest_free_block_bytes", &R::largest_free_block_bytes,
            &Message::largest_free_block_bytes),
      Plain("fragmentation", &R::fragmentation, &Message::fragmentation),
      Plain("segments", &R::segments, &Message::segments),
      Plain("scrubbed_bytes", &R::scrubbed_bytes, &Message::scrubbed_bytes),
      Plain("trimmed_bytes", &R::trimmed_bytes, &Message::trimmed_bytes),
      Plain("limit_bytes", &R::limit_bytes, &Message::limit_bytes),
      Plain("evictions", &R::evictions, &Message::evictions),
      Plain("evicted_bytes", &R::evicted_bytes, &Message::evicted_bytes),
      Plain("demotions", &R::demotions, &Message::demotions),
      Plain("demoted_bytes", &R::demoted_bytes, &Message::demoted_bytes),
      ByHand(
          "size_classes", &R::size_classes,
          [](const Message& pool) { return FromTables<SizeClassStats>(pool.size_classes()); },
          TablesJson<SizeClassStats>),
  };
};

template <>
struct RecordTable<DeviceInfo> {
  using R = DeviceInfo;
  using Message = v1::DeviceInfo;
  static constexpr auto kFields = std::tuple{
      Plain("ordinal", &R::ordinal, &Message::ordinal),
      Plain("uuid", &R::uuid, &Message::uuid),
      Plain("name", &R::name, &Message::name),
      Plain("total_bytes", &R::total_bytes, &Message::total_bytes),
      Plain("free_bytes", &R::free_bytes, &Message::free_bytes),
      Plain("vmm", &R::vmm, &Message::vmm),
      Plain("posix_fd", &R::posix_fd, &Message::posix_fd),
      ByHand("handle_type", &R::handle_type,
             [](const Message& device) { return HandleTypeName(device.handle_type()); }),
      // The daemon names what broke it, and nothing while healthy.
      ByHand("healthy", &R::healthy,
             [](const Message& device) { return device.health_error().empty(); }),
      Plain("health_error", &R::health_error, &Message::health_error),
      // An older daemon serves CUDA only and does not say.
      ByHand("api", &R::api,
             [](const Message& device) {
               return device.api().empty() ? std::string("cuda") : device.api();
             }),
      Plain("pci_address", &R::pci_address, &Message::pci_address),
      Plain("ipc", &R::ipc, &Message::ipc),
      Plain("has_free", &R::has_free, &Message::has_free),
      Plain("memd_bytes", &R::memd_bytes, &Message::memd_bytes),
      Plain("outside_memd_bytes", &R::outside_memd_bytes, &Message::outside_memd_bytes),
  };
};

template <>
struct RecordTable<TransferStats> {
  using R = TransferStats;
  using Message = v1::TransferStats;
  static constexpr auto kFields = std::tuple{
      Plain("active", &R::active, &Message::active),
      Plain("active_bytes", &R::active_bytes, &Message::active_bytes),
      Plain("completed", &R::completed, &Message::completed),
      Plain("bytes", &R::bytes, &Message::bytes),
      Plain("failed", &R::failed, &Message::failed),
      Plain("retries", &R::retries, &Message::retries),
      Plain("rejected", &R::rejected, &Message::rejected),
  };
};

template <>
struct RecordTable<DurabilityStats> {
  using R = DurabilityStats;
  using Message = v1::DurabilityStats;
  static constexpr auto kFields = std::tuple{
      Plain("recording", &R::recording, &Message::recording),
      Plain("not_recording", &R::not_recording, &Message::not_recording),
      Plain("generation", &R::generation, &Message::generation),
      Plain("recovered", &R::recovered, &Message::recovered),
      ByHand(
          "recovered_unix_ns", &R::recovered_at,
          [](const Message& durability) {
            return absl::FromUnixNanos(durability.recovered_unix_ns());
          },
          [](absl::Time at) { return UnixNanos(at); }),
      ByHand(
          "recovery_ns", &R::recovery,
          [](const Message& durability) { return absl::Nanoseconds(durability.recovery_ns()); },
          [](absl::Duration recovery) { return absl::ToInt64Nanoseconds(recovery); }),
      Plain("adopted_segments", &R::adopted_segments, &Message::adopted_segments),
      Plain("adopted_buffers", &R::adopted_buffers, &Message::adopted_buffers),
      Plain("adopted_bytes", &R::adopted_bytes, &Message::adopted_bytes),
      Plain("lost_buffers", &R::lost_buffers, &Message::lost_buffers),
      Plain("lost_segments", &R::lost_segments, &Message::lost_segments),
      Plain("in_grace", &R::in_grace, &Message::in_grace),
      Plain("awaiting_holders", &R::awaiting_holders, &Message::awaiting_holders),
      Plain("reclaimable_leases", &R::reclaimable_leases, &Message::reclaimable_leases),
  };
};

template <>
struct RecordTable<MemoryWaits> {
  using R = MemoryWaits;
  using Message = v1::MemoryWaits;
  static constexpr auto kFields = std::tuple{
      Plain("location", &R::location, &Message::location),
      Plain("calls", &R::calls, &Message::calls),
      Plain("bytes", &R::bytes, &Message::bytes),
  };
};

template <>
struct RecordTable<UidUsage> {
  using R = UidUsage;
  using Message = v1::UidUsage;
  static constexpr auto kFields = std::tuple{
      Plain("uid", &R::uid, &Message::uid),
      Plain("location", &R::location, &Message::location),
      Plain("bytes", &R::bytes, &Message::bytes),
      Plain("buffers", &R::buffers, &Message::buffers),
      Plain("quota_bytes", &R::quota_bytes, &Message::quota_bytes),
  };
};

template <>
struct RecordTable<SessionInfo> {
  using R = SessionInfo;
  using Message = v1::SessionInfo;
  static constexpr auto kFields = std::tuple{
      Plain("id", &R::id, &Message::id),
      // pid_t is signed; the protocol's pid is not.
      ByHand("pid", &R::pid,
             [](const Message& session) { return static_cast<pid_t>(session.pid()); }),
      Plain("uid", &R::uid, &Message::uid),
      Plain("gid", &R::gid, &Message::gid),
      Plain("command", &R::command, &Message::command),
      Plain("lease_count", &R::lease_count, &Message::lease_count),
      ByHand(
          "started_unix_ns", &R::started,
          [](const Message& session) { return absl::FromUnixNanos(session.started_unix_ns()); },
          [](absl::Time started) { return UnixNanos(started); }),
      Plain("created_bytes", &R::created_bytes, &Message::created_bytes),
  };
};

template <>
struct RecordTable<ReplicaInfo> {
  using R = ReplicaInfo;
  using Message = v1::Replica;
  static constexpr auto kFields = std::tuple{
      Plain("location", &R::location, &Message::location),
      Plain("state", &R::state, &Message::state),
      Plain("generation", &R::generation, &Message::generation),
      Plain("readers", &R::readers, &Message::readers),
      Plain("writers", &R::writers, &Message::writers),
      Plain("bytes", &R::bytes, &Message::bytes),
      Plain("charged_uid", &R::charged_uid, &Message::charged_uid),
  };
};

template <>
struct RecordTable<LeaseHolder> {
  using R = LeaseHolder;
  using Message = v1::LeaseHolder;
  static constexpr auto kFields = std::tuple{
      Plain("session_id", &R::session_id, &Message::session_id),
      // pid_t is signed; the protocol's pid is not.
      ByHand("pid", &R::pid,
             [](const Message& holder) { return static_cast<pid_t>(holder.pid()); }),
      Plain("uid", &R::uid, &Message::uid),
      Plain("command", &R::command, &Message::command),
      Plain("location", &R::location, &Message::location),
      ByHand(
          "access", &R::access,
          [](const Message& holder) {
            return holder.access() == v1::READ_WRITE ? Access::kReadWrite : Access::kRead;
          },
          [](Access access) {
            return std::string(access == Access::kReadWrite ? "read_write" : "read");
          }),
      Plain("leases", &R::leases, &Message::leases),
      ByHand(
          "since_unix_ns", &R::since,
          [](const Message& holder) { return absl::FromUnixNanos(holder.since_unix_ns()); },
          [](absl::Time since) { return UnixNanos(since); }),
  };
};

template <>
struct RecordTable<LeaseHolders> {
  using R = LeaseHolders;
  using Message = v1::LeaseHolders;
  static constexpr auto kFields = std::tuple{
      ByHand(
          "listed", &R::listed,
          [](const Message& holders) { return FromTables<LeaseHolder>(holders.listed()); },
          TablesJson<LeaseHolder>),
      Plain("unlisted_leases", &R::unlisted_leases, &Message::unlisted_leases),
      Plain("other_users_leases", &R::other_users_leases, &Message::other_users_leases),
  };
};

template <>
struct RecordTable<Recommendation> {
  using R = Recommendation;
  using Message = v1::Recommendation;
  static constexpr auto kFields = std::tuple{
      Plain("subject", &R::subject, &Message::subject),
      Plain("action", &R::action, &Message::action),
      ByHand("locations", &R::locations,
             [](const Message& recommendation) {
               return std::vector<std::string>(recommendation.locations().begin(),
                                               recommendation.locations().end());
             }),
      Plain("evidence", &R::evidence, &Message::evidence),
      Plain("bytes", &R::bytes, &Message::bytes),
  };
};

template <>
struct RecordTable<Leak> {
  using R = Leak;
  using Message = v1::Leak;
  static constexpr auto kFields = std::tuple{
      Plain("uid", &R::uid, &Message::uid),
      Plain("kind", &R::kind, &Message::kind),
      Plain("subject", &R::subject, &Message::subject),
      Plain("bytes", &R::bytes, &Message::bytes),
      ByHand(
          "age_seconds", &R::age,
          [](const Message& leak) { return absl::Seconds(leak.age_seconds()); },
          [](absl::Duration age) { return absl::ToDoubleSeconds(age); }),
      Plain("pid", &R::pid, &Message::pid),
      Plain("evidence", &R::evidence, &Message::evidence),
  };
};

// The progress and the priority are read by convert.cc's own readers.
TransferProgress FromProto(const v1::TransferProgress& progress);
Priority FromProto(v1::TransferPriority priority);

template <>
struct RecordTable<TransferInfo> {
  using R = TransferInfo;
  using Message = v1::TransferInfo;
  static constexpr auto kFields = std::tuple{
      ByHand(
          "progress", &R::progress,
          [](const Message& transfer) { return FromProto(transfer.progress()); },
          [](const TransferProgress& progress) { return TransferProgressJson(progress); }),
      ByHand(
          "priority", &R::priority,
          [](const Message& transfer) { return FromProto(transfer.priority()); },
          [](Priority priority) { return PriorityName(priority); }),
      Plain("source_name", &R::source_name, &Message::source_name),
      Plain("source_location", &R::source_location, &Message::source_location),
      Plain("source_offset", &R::source_offset, &Message::source_offset),
      Plain("destination_name", &R::destination_name, &Message::destination_name),
      Plain("destination_location", &R::destination_location,
            &Message::destination_location),
      Plain("destination_offset", &R::destination_offset, &Message::destination_offset),
      ByHand(
          "age_ns", &R::age,
          [](const Message& transfer) { return absl::Nanoseconds(transfer.age_ns()); },
          [](absl::Duration age) { return absl::ToInt64Nanoseconds(age); }),
      Plain("session_id", &R::session_id, &Message::session_id),
      // pid_t is signed; the protocol's pid is not.
      ByHand("pid", &R::pid,
             [](const Message& transfer) { return static_cast<pid_t>(transfer.pid()); }),
      Plain("uid", &R::uid, &Message::uid),
      Plain("command", &R::command, &Message::command),
  };
};

template <>
struct RecordTable<TransferList> {
  using R = TransferList;
  using Message = v1::ListTransfersReply;
  static constexpr auto kFields = std::tuple{
      ByHand(
          "transfers", &R::transfers,
          [](const Message& reply) { return FromTables<TransferInfo>(reply.transfers()); },
          TablesJson<TransferInfo>),
      Plain("omitted", &R::omitted, &Message::omitted),
  };
};

}  // namespace memd::internal
