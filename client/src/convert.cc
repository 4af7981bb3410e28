#include "client/src/convert.h"

#include "client/src/record_fields.h"

namespace memd::internal {

BufferInfo FromProto(const v1::BufferInfo& info) {
  BufferInfo out;
  out.name = info.name();
  out.id = info.id();
  out.size = info.size_bytes();
  out.location = info.location();
  out.owner_uid = info.owner_uid();
  out.owner_gid = info.owner_gid();
  out.mode = info.mode();
  out.state = info.state() == v1::SEALED ? BufferState::kSealed
                                         : BufferState::kCreating;
  out.persistence = info.persistence() == v1::EPHEMERAL
                        ? Persistence::kEphemeral
                        : Persistence::kPersistent;
  out.lease_count = info.lease_count();
  out.unlinked = info.unlinked();
  out.created = absl::FromUnixNanos(info.created_unix_ns());
  // 0: not sealed yet.
  if (info.sealed_unix_ns() != 0) {
    out.sealed = absl::FromUnixNanos(info.sealed_unix_ns());
  }
  out.creator_pid = static_cast<pid_t>(info.creator_pid());
  for (const v1::Attr& attr : info.attrs()) out.attrs.emplace(attr.key(), attr.value());
  for (const v1::Replica& replica : info.replicas()) {
    out.replicas.push_back(FromTable<ReplicaInfo>(replica));
  }
  out.sync_state = info.sync_state();
  out.generation = info.generation();
  out.fill_failure = info.fill_failure();
  out.usage = FromProto(info.usage());
  out.placement = info.placement();
  out.retention = info.retention();
  out.numa_node = info.numa_node();
  out.holders = FromTable<LeaseHolders>(info.holders());
  return out;
}

BufferUsage FromProto(const v1::BufferUsage& usage) {
  BufferUsage out;
  out.opens_by_location.insert(usage.opens_by_location().begin(),
                               usage.opens_by_location().end());
  out.opens_by_uid.insert(usage.opens_by_uid().begin(), usage.opens_by_uid().end());
  out.lazy_copies = usage.lazy_copies();
  out.bytes_copied.insert(usage.bytes_copied().begin(), usage.bytes_copied().end());
  out.copies_avoided = usage.copies_avoided();
  // 0: never opened since the daemon started.
  if (usage.last_used_unix_ns() != 0) out.last_used = absl::FromUnixNanos(usage.last_used_unix_ns());
  return out;
}

Recommendation FromProto(const v1::Recommendation& recommendation) {
  return FromTable<Recommendation>(recommendation);
}

Leak FromProto(const v1::Leak& leak) { return FromTable<Leak>(leak); }

LeakReport FromProto(const v1::LeaksReply& reply) {
  LeakReport report;
  for (const v1::Leak& leak : reply.leaks()) report.leaks.push_back(FromProto(leak));
  report.omitted = reply.omitted();
  return report;
}

SizeClassStats FromProto(const v1::SizeClassStats& size_class) {
  return FromTable<SizeClassStats>(size_class);
}

PoolStats FromProto(const v1::PoolStats& pool) { return FromTable<PoolStats>(pool); }

DeviceInfo FromProto(const v1::DeviceInfo& device) { return FromTable<DeviceInfo>(device); }

TransferStats FromProto(const v1::TransferStats& stats) { return FromTable<TransferStats>(stats); }

DurabilityStats FromProto(const v1::DurabilityStats& durability) {
  return FromTable<DurabilityStats>(durability);
}

namespace {

TransferState FromProto(v1::TransferState state) {
  switch (state) {
    case v1::TRANSFER_RUNNING: return TransferState::kRunning;
    case v1::TRANSFER_DONE: return TransferState::kDone;
    case v1::TRANSFER_FAILED: return TransferState::kFailed;
    case v1::TRANSFER_CANCELLED: return TransferState::kCancelled;
    default: return TransferState::kQueued;
  }
}

std::string DirectionName(v1::TransferDirection direction) {
  switch (direction) {
    case v1::HOST_TO_HOST: return "h2h";
    case v1::HOST_TO_DEVICE: return "h2d";
    case v1::DEVICE_TO_HOST: return "d2h";
    case v1::DEVICE_TO_DEVICE: return "d2d";
    default: return "";
  }
}

std::string PathName(v1::DataPath path) {
  switch (path) {
    case v1::PATH_CPU: return "cpu";
    case v1::PATH_STAGED: return "staged";
    case v1::PATH_DIRECT: return "direct";
    case v1::PATH_DEVICE: return "device";
    case v1::PATH_PEER_STAGED: return "peer_staged";
    default: return "";  // Not started.
  }
}

// A code this library does not know (a newer daemon's) is UNKNOWN, with
// the daemon's message.
absl::Status StatusOf(std::int32_t code, const std::string& message) {
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(message);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace

TransferProgress FromProto(const v1::TransferProgress& progress) {
  TransferProgress out;
  out.id = progress.transfer_id();
  out.state = FromProto(progress.state());
  out.bytes_done = progress.bytes_done();
  out.bytes_total = progress.bytes_total();
  out.direction = DirectionName(progress.direction());
  out.path = PathName(progress.path());
  out.device = progress.device();
  out.retries = progress.retries();
  out.status = StatusOf(progress.error_code(), progress.error_message());
  out.elapsed = absl::Nanoseconds(progress.elapsed_ns());
  return out;
}

Priority FromProto(v1::TransferPriority priority) {
  switch (priority) {
    case v1::PRIORITY_CRITICAL: return Priority::kCritical;
    case v1::PRIORITY_BACKGROUND: return Priority::kBackground;
    default: return Priority::kNormal;  // As the daemon treats unspecified.
  }
}

TransferInfo FromProto(const v1::TransferInfo& transfer) {
  return FromTable<TransferInfo>(transfer);
}

TransferList FromProto(const v1::ListTransfersReply& reply) {
  return FromTable<TransferList>(reply);
}

v1::TransferPriority ToProto(Priority priority) {
  switch (priority) {
    case Priority::kCritical: return v1::PRIORITY_CRITICAL;
    case Priority::kNormal: return v1::PRIORITY_NORMAL;
    case Priority::kBackground: return v1::PRIORITY_BACKGROUND;
  }
  return v1::PRIORITY_NORMAL;
}

DaemonStats FromProto(const v1::StatsReply& reply) {
  DaemonStats stats;
  stats.version = reply.version();
  stats.backend = reply.backend();
  for (const auto& pool : reply.pools()) stats.pools.push_back(FromProto(pool));
  stats.buffers = reply.buffers();
  stats.sessions = reply.sessions();
  stats.leases = reply.leases();
  stats.waits = reply.waits();
  stats.metrics_address = reply.metrics_address();
  stats.started = absl::FromUnixNanos(reply.started_unix_ns());
  for (const auto& device : reply.devices()) stats.devices.push_back(FromProto(device));
  stats.transfers = FromProto(reply.transfers());
  stats.daemon_wide = reply.daemon_wide();
  stats.durability = FromProto(reply.durability());
  for (const auto& waits : reply.memory_waits()) {
    stats.memory_waits.push_back(FromTable<MemoryWaits>(waits));
  }
  return stats;
}

SessionInfo FromProto(const v1::SessionInfo& session) { return FromTable<SessionInfo>(session); }

UidUsage FromProto(const v1::UidUsage& usage) { return FromTable<UidUsage>(usage); }

}  // namespace memd::internal
