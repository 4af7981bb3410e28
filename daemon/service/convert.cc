#include "daemon/service/convert.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/attrs.h"
#include "common/names.h"
#include "common/status_macros.h"

namespace memd::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void ToProto(const broker::BufferInfo& info, v1::BufferInfo* out) {
  out->set_name(info.name);
  out->set_id(info.id);
  out->set_size_bytes(info.size);
  out->set_location(info.location.ToString());
  out->set_owner_uid(info.owner_uid);
  out->set_owner_gid(info.owner_gid);
  out->set_mode(info.mode);
  out->set_state(info.state == broker::BufferState::kSealed ? v1::SEALED
                                                            : v1::CREATING);
  out->set_persistence(info.persistence == broker::Persistence::kEphemeral
                           ? v1::EPHEMERAL
                           : v1::PERSISTENT);
  out->set_lease_count(info.lease_count);
  out->set_unlinked(info.unlinked);
  out->set_created_unix_ns(absl::ToUnixNanos(info.created));
  out->set_sealed_unix_ns(info.sealed ? absl::ToUnixNanos(*info.sealed) : 0);
  out->set_creator_pid(static_cast<std::uint32_t>(info.creator_pid));
  for (const auto& [key, value] : info.attrs) {
    v1::Attr* attr = out->add_attrs();
    attr->set_key(key);
    attr->set_value(value);
  }
  for (const broker::ReplicaInfo& replica : info.replicas) {
    v1::Replica* copy = out->add_replicas();
    copy->set_location(replica.report.location.ToString());
    copy->set_state(std::string(broker::ReplicaStateName(replica.report.state)));
    copy->set_generation(replica.report.generation);
    copy->set_readers(replica.report.readers);
    copy->set_writers(replica.report.writers);
    copy->set_bytes(replica.bytes);
    copy->set_charged_uid(replica.charged_uid);
  }
  ToProto(info.usage, out->mutable_usage());
  // Strings that are mostly empty are set only when not: setting even an
  // empty one allocates, and every Open's lease carries them.
  if (!info.sync_state.empty()) out->set_sync_state(info.sync_state);
  out->set_generation(info.generation);
  if (!info.fill_failure.empty()) out->set_fill_failure(info.fill_failure);
  if (!info.placement.empty()) out->set_placement(info.placement);
  out->set_retention(std::string(broker::RetentionName(info.retention)));
  out->set_numa_node(info.numa_node);
  // Stat's alone: a List or a Lease leaves the message unset.
  const broker::LeaseHolders& holders = info.holders;
  if (!holders.listed.empty() || holders.unlisted_leases > 0 ||
      holders.other_users_leases > 0) {
    ToProto(holders, out->mutable_holders());
  }
}

void ToProto(const broker::LeaseHolders& holders, v1::LeaseHolders* out) {
  for (const broker::LeaseHolder& holder : holders.listed) {
    v1::LeaseHolder* listed = out->add_listed();
    listed->set_session_id(holder.session);
    listed->set_pid(static_cast<std::uint32_t>(holder.pid));
    listed->set_uid(holder.uid);
    listed->set_command(holder.command);
    listed->set_location(holder.location.ToString());
    listed->set_access(ToProto(holder.access));
    listed->set_leases(holder.leases);
    listed->set_since_unix_ns(absl::ToUnixNanos(holder.since));
  }
  out->set_unlisted_leases(holders.unlisted_leases);
  out->set_other_users_leases(holders.other_users_leases);
}

v1::Access ToProto(broker::Access access) {
  return access == broker::Access::kReadWrite ? v1::READ_WRITE : v1::READ;
}

void ToProto(const broker::BufferUsage& usage, v1::BufferUsage* out) {
  for (const auto& [location, n] : usage.opens_by_location) {
    (*out->mutable_opens_by_location())[location] = n;
  }
  for (const auto& [uid, n] : usage.opens_by_uid) (*out->mutable_opens_by_uid())[uid] = n;
  out->set_lazy_copies(usage.lazy_copies);
  for (const auto& [direction, bytes] : usage.bytes_copied) {
    (*out->mutable_bytes_copied())[direction] = bytes;
  }
  out->set_copies_avoided(usage.copies_avoided);
  out->set_last_used_unix_ns(usage.last_used.has_value() ? absl::ToUnixNanos(*usage.last_used)
                                                         : 0);
}

void ToProto(const broker::Recommendation& recommendation, v1::Recommendation* out) {
  out->set_subject(recommendation.subject);
  out->set_action(recommendation.action);
  for (const std::string& location : recommendation.locations) out->add_locations(location);
  out->set_evidence(recommendation.evidence);
  out->set_bytes(recommendation.bytes);
}

void ToProto(const broker::Leak& leak, v1::Leak* out) {
  out->set_uid(leak.uid);
  out->set_kind(leak.kind);
  out->set_subject(leak.subject);
  out->set_bytes(leak.bytes);
  out->set_age_seconds(absl::ToDoubleSeconds(leak.age));
  out->set_pid(static_cast<std::uint32_t>(leak.pid));
  out->set_evidence(leak.evidence);
}

void ToProto(const broker::LeakReport& report, v1::LeaksReply* out) {
  for (const broker::Leak& leak : report.leaks) ToProto(leak, out->add_leaks());
  out->set_omitted(report.omitted);
}

broker::LeakRules FromProto(const v1::LeaksRequest& request) {
  broker::LeakRules rules;
  // A plain uint64 sends no 0 at all: only a client that set the field
  // explicitly asks for 0.
  if (request.has_older_than_seconds()) {
    rules.older_than = absl::Seconds(static_cast<std::int64_t>(std::min<std::uint64_t>(
        request.older_than_seconds(), std::numeric_limits<std::int64_t>::max())));
  }
  if (request.many_leases() != 0) rules.many_leases = request.many_leases();
  return rules;
}

void ToProto(const broker::SessionInfo& info, v1::SessionInfo* out) {
  out->set_id(info.id);
  out->set_pid(static_cast<std::uint32_t>(info.pid));
  out->set_uid(info.uid);
  out->set_gid(info.gid);
  out->set_command(info.command);
  out->set_lease_count(info.lease_count);
  out->set_started_unix_ns(absl::ToUnixNanos(info.started));
  out->set_created_bytes(info.created_bytes);
}

void ToProto(const broker::UidUsage& usage, v1::UidUsage* out) {
  out->set_uid(usage.uid);
  out->set_location(usage.location.ToString());
  out->set_bytes(usage.bytes);
  out->set_buffers(usage.buffers);
  out->set_quota_bytes(usage.quota_bytes);
}

void ToProto(const pool::SizeClassStats& size_class, v1::SizeClassStats* out) {
  out->set_bytes(size_class.bytes);
  out->set_allocations(size_class.allocations);
  out->set_cached(size_class.cached);
}

void ToProto(const pool::PoolStats& stats, v1::PoolStats* out) {
  out->set_location(stats.location.ToString());
  out->set_reserved_bytes(stats.reserved_bytes);
  out->set_used_bytes(stats.used_bytes);
  out->set_hit_count(stats.hit_count);
  out->set_miss_count(stats.miss_count);
  out->set_segments(stats.segments);
  out->set_limit_bytes(stats.limit_bytes);
  out->set_free_bytes(stats.free_bytes());
  out->set_peak_reserved_bytes(stats.peak_reserved_bytes);
  out->set_peak_used_bytes(stats.peak_used_bytes);
  out->set_largest_free_block_bytes(stats.largest_free_bytes);
  out->set_fragmentation(stats.fragmentation());
  out->set_scrubbed_bytes(stats.scrubbed_bytes);
  out->set_trimmed_bytes(stats.trimmed_bytes);
  for (const pool::SizeClassStats& size_class : stats.size_classes) {
    ToProto(size_class, out->add_size_classes());
  }
}

void ToProto(const broker::PressureCounts& taken, v1::PoolStats* out) {
  out->set_evictions(taken.evictions);
  out->set_evicted_bytes(taken.evicted_bytes);
  out->set_demotions(taken.demotions);
  out->set_demoted_bytes(taken.demoted_bytes);
}

v1::HandleType ToProto(backend::HandleType type) {
  switch (type) {
    case backend::HandleType::kHostMemfd: return v1::HOST_MEMFD;
    case backend::HandleType::kCudaVmmFd: return v1::CUDA_VMM_FD;
    case backend::HandleType::kCudaIpc: return v1::CUDA_IPC;
    case backend::HandleType::kLevelZeroIpc: return v1::LEVEL_ZERO_IPC;
  }
  return v1::HANDLE_TYPE_UNSPECIFIED;
}

void ToProto(const backend::DeviceInfo& device, v1::DeviceInfo* out) {
  out->set_ordinal(device.ordinal);
  out->set_uuid(device.uuid);
  out->set_name(device.name);
  out->set_total_bytes(device.total_bytes);
  out->set_free_bytes(device.free_bytes);
  out->set_vmm(device.vmm);
  out->set_posix_fd(device.posix_fd);
  out->set_handle_type(ToProto(device.handle_type));
  out->set_api(device.api);
  out->set_pci_address(device.pci_address);
  out->set_ipc(device.ipc);
  out->set_has_free(device.has_free);
}

void ToProto(const pool::DeviceMemory& memory, v1::DeviceInfo* out) {
  out->set_memd_bytes(memory.memd_bytes);
  out->set_outside_memd_bytes(memory.outside_memd_bytes);
}

void ToProto(const transfer::DeviceStats& device, v1::DeviceInfo* out) {
  out->set_health_error(device.health.ok() ? "" : device.health.ToString());
}

namespace {

v1::TransferState ToProto(transfer::TransferState state) {
  switch (state) {
    case transfer::TransferState::kQueued: return v1::TRANSFER_QUEUED;
    case transfer::TransferState::kRunning: return v1::TRANSFER_RUNNING;
    case transfer::TransferState::kDone: return v1::TRANSFER_DONE;
    case transfer::TransferState::kFailed: return v1::TRANSFER_FAILED;
    case transfer::TransferState::kCancelled: return v1::TRANSFER_CANCELLED;
  }
  return v1::TRANSFER_STATE_UNSPECIFIED;
}

v1::TransferDirection ToProto(transfer::Direction direction) {
  switch (direction) {
    case transfer::Direction::kHostToHost: return v1::HOST_TO_HOST;
    case transfer::Direction::kHostToDevice: return v1::HOST_TO_DEVICE;
    case transfer::Direction::kDeviceToHost: return v1::DEVICE_TO_HOST;
    case transfer::Direction::kDeviceToDevice: return v1::DEVICE_TO_DEVICE;
  }
  return v1::DIRECTION_UNSPECIFIED;
}

v1::DataPath ToProto(transfer::DataPath path) {
  switch (path) {
    case transfer::DataPath::kNone: return v1::DATA_PATH_UNSPECIFIED;
    case transfer::DataPath::kCpu: return v1::PATH_CPU;
    case transfer::DataPath::kStaged: return v1::PATH_STAGED;
    case transfer::DataPath::kDirect: return v1::PATH_DIRECT;
    case transfer::DataPath::kDevice: return v1::PATH_DEVICE;
    case transfer::DataPath::kPeerStaged: return v1::PATH_PEER_STAGED;
  }
  return v1::DATA_PATH_UNSPECIFIED;
}

}  // namespace

void ToProto(const transfer::TransferProgress& progress, absl::Time now,
             v1::TransferProgress* out) {
  out->set_transfer_id(progress.id);
  out->set_state(ToProto(progress.state));
  out->set_bytes_done(progress.bytes_done);
  out->set_bytes_total(progress.bytes_total);
  out->set_direction(ToProto(progress.direction));
  out->set_path(ToProto(progress.path));
  out->set_device(progress.device);
  out->set_retries(progress.retries);
  out->set_error_code(static_cast<std::int32_t>(progress.status.code()));
  out->set_error_message(std::string(progress.status.message()));
  // Not started: no time yet. Ended: up to the end, not to the reply.
  if (progress.started != absl::InfinitePast()) {
    const absl::Time end = progress.terminal() ? progress.finished : now;
    out->set_elapsed_ns(absl::ToInt64Nanoseconds(std::max(end - progress.started,
                                                          absl::ZeroDuration())));
  }
}

v1::TransferPriority ToProto(transfer::Priority priority) {
  switch (priority) {
    case transfer::Priority::kCritical: return v1::PRIORITY_CRITICAL;
    case transfer::Priority::kNormal: return v1::PRIORITY_NORMAL;
    case transfer::Priority::kBackground: return v1::PRIORITY_BACKGROUND;
  }
  return v1::PRIORITY_UNSPECIFIED;
}

void ToProto(const transfer::ListedTransfer& listed, absl::Time now, v1::TransferInfo* out) {
  ToProto(listed.progress, now, out->mutable_progress());
  out->set_priority(ToProto(listed.progress.priority));
  out->set_source_name(listed.source_name);
  out->set_source_location(listed.source_location);
  out->set_source_offset(listed.source_offset);
  out->set_destination_name(listed.destination_name);
  out->set_destination_location(listed.destination_location);
  out->set_destination_offset(listed.destination_offset);
  out->set_age_ns(absl::ToInt64Nanoseconds(listed.age));
  out->set_session_id(listed.session);
  out->set_uid(listed.uid);
}

void ToProto(const transfer::EngineStats& stats, v1::TransferStats* out) {
  out->set_active(stats.active_transfers);
  out->set_active_bytes(stats.active_bytes);
  std::uint64_t completed = 0;
  std::uint64_t bytes = 0;
  for (const transfer::FlowStats& flow : stats.flows) {
    completed += flow.transfers;
    bytes += flow.bytes;
  }
  std::uint64_t failed = 0;
  for (const auto& [reason, count] : stats.failures) failed += count;
  out->set_completed(completed);
  out->set_bytes(bytes);
  out->set_failed(failed);
  out->set_retries(stats.retries);
  out->set_rejected(stats.admission_rejections);
}

void ToProto(const durable::DurabilityStatus& status, v1::DurabilityStats* out) {
  out->set_recording(status.recording);
  out->set_not_recording(status.not_recording);
  const durable::RecoveryReport& recovery = status.recovery;
  out->set_generation(recovery.generation);
  out->set_recovered(recovery.recovered);
  out->set_recovered_unix_ns(absl::ToUnixNanos(recovery.when));
  out->set_recovery_ns(absl::ToInt64Nanoseconds(recovery.took));
  out->set_adopted_segments(recovery.segments);
  out->set_adopted_buffers(recovery.buffers);
  out->set_adopted_bytes(recovery.bytes);
  out->set_lost_buffers(recovery.lost_buffers);
  out->set_lost_segments(recovery.lost_segments);
}

void ToProto(const broker::GraceCounts& grace, v1::DurabilityStats* out) {
  out->set_in_grace(grace.on);
  out->set_awaiting_holders(grace.awaiting_holders);
  out->set_reclaimable_leases(grace.reclaimable_leases);
}

absl::StatusOr<transfer::Priority> FromProto(v1::TransferPriority priority) {
  switch (priority) {
    case v1::PRIORITY_CRITICAL: return transfer::Priority::kCritical;
    case v1::PRIORITY_UNSPECIFIED:
    case v1::PRIORITY_NORMAL: return transfer::Priority::kNormal;
    case v1::PRIORITY_BACKGROUND: return transfer::Priority::kBackground;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "priority ", static_cast<int>(priority),
          " is not one of critical (1), normal (2), background (3)"));
  }
}

broker::CopyRegion FromProto(const v1::Region& region) {
  return broker::CopyRegion{region.lease_id(), region.offset(), region.length()};
}

absl::StatusOr<BufferAttrs> FromProto(
    const google::protobuf::RepeatedPtrField<v1::Attr>& attrs) {
  // Before building anything: a request may carry thousands.
  if (static_cast<std::size_t>(attrs.size()) > kMaxAttrs) {
    return absl::InvalidArgumentError(
        absl::StrCat(attrs.size(), " attributes given; the limit is ", kMaxAttrs));
  }
  BufferAttrs out;
  for (const v1::Attr& attr : attrs) {
    if (!out.emplace(attr.key(), attr.value()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute key ", QuotedForMessage(attr.key()), " is given twice"));
    }
  }
  return out;
}

namespace {

// Longer than any hint's name, short enough to quote in a message.
constexpr std::size_t kMaxHintBytes = 32;

// The locations a client says its process can map, for location auto:
// each well formed, a bounded number (duplicates are harmless).
absl::StatusOr<std::vector<Location>> MappableFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& texts) {
  if (static_cast<std::size_t>(texts.size()) > kMaxMappableLocations) {
    return absl::InvalidArgumentError(absl::StrCat(
        texts.size(), " mappable locations given; the limit is ", kMaxMappableLocations));
  }
  std::vector<Location> out;
  out.reserve(texts.size());
  for (const std::string& text : texts) {
    // Empty parses as host elsewhere; here it is a client's mistake.
    auto location = text.empty() ? absl::InvalidArgumentError("an empty location")
                                 : Location::Parse(text);
    if (!location.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mappable location ", QuotedForMessage(text), ": ", location.status().message()));
    }
    out.push_back(*location);
  }
  return out;
}

}  // namespace

absl::StatusOr<broker::CreateParams> FromProto(const v1::CreateRequest& request) {
  broker::CreateParams params;
  params.name = request.name();
  params.size = request.size_bytes();
  params.auto_location = request.location() == kAutoLocation;
  if (params.auto_location) {
    auto hint = broker::ParseAccessHint(request.access_hint());
    // The parser quotes what it got: a hostile hint of a megabyte is not
    // echoed back.
    if (!hint.ok() && request.access_hint().size() > kMaxHintBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an access hint of ", request.access_hint().size(),
          " bytes is not one memd knows (", QuotedForMessage(request.access_hint()), ")"));
    }
    if (!hint.ok()) return hint.status();
    params.hint = *hint;
    MEMD_ASSIGN_OR_RETURN(params.mappable, MappableFromProto(request.mappable_locations()));
  } else {
    MEMD_ASSIGN_OR_RETURN(params.location, Location::Parse(request.location()));
    // What only auto reads, given with a named location, is a client's
    // mistake worth telling rather than a wish silently ignored.
    if (!request.access_hint().empty() || !request.mappable_locations().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an access hint and mappable locations go with location auto, not with ",
          QuotedForMessage(request.location())));
    }
  }
  params.mode = request.has_mode() ? request.mode() : broker::kDefaultMode;
  switch (request.persistence()) {
    case v1::PERSISTENCE_UNSPECIFIED:
    case v1::PERSISTENT:
      params.persistence = broker::Persistence::kPersistent;
      break;
    case v1::EPHEMERAL:
      params.persistence = broker::Persistence::kEphemeral;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown persistence ", request.persistence()));
  }
  MEMD_ASSIGN_OR_RETURN(params.attrs, FromProto(request.attrs()));
  MEMD_ASSIGN_OR_RETURN(params.retention, broker::ParseRetention(request.retention()));
  MEMD_ASSIGN_OR_RETURN(params.numa, broker::ParseNumaRequest(request.numa()));
  return params;
}

absl::StatusOr<broker::Access> FromProto(v1::Access access) {
  switch (access) {
    case v1::ACCESS_UNSPECIFIED:
    case v1::READ:
      return broker::Access::kRead;
    case v1::READ_WRITE:
      return broker::Access::kReadWrite;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown access ", access));
  }
}

absl::StatusOr<broker::OpenParams> FromProto(const v1::OpenRequest& request) {
  broker::OpenParams params;
  params.name = request.name();
  MEMD_ASSIGN_OR_RETURN(params.access, FromProto(request.access()));
  if (request.has_owner_uid()) params.expected_owner = request.owner_uid();
  params.notify_freed = request.notify_freed();
  if (!request.location().empty()) {
    MEMD_ASSIGN_OR_RETURN(params.location, ReplicaLocation(request.location()));
  }
  return params;
}

absl::StatusOr<Location> ReplicaLocation(const std::string& text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "no location given: name one (\"host\", \"pinned\" or \"device:N\")");
  }
  return Location::Parse(text);
}

absl::StatusOr<broker::OpenParams> FromProto(const v1::PrefetchRequest& request) {
  broker::OpenParams params;
  params.name = request.name();
  MEMD_ASSIGN_OR_RETURN(params.location, ReplicaLocation(request.location()));
  if (request.has_owner_uid()) params.expected_owner = request.owner_uid();
  params.lease = false;
  params.wait_for_seal = request.wait_timeout_ms() > 0;
  return params;
}

absl::StatusOr<broker::CreateParams> FromProto(const v1::OpenOrCreateRequest& request) {
  MEMD_ASSIGN_OR_RETURN(broker::CreateParams params, FromProto(request.create()));
  if (request.has_owner_uid()) params.expected_owner = request.owner_uid();
  return params;
}

}  // namespace memd::service
