#include "client/src/convert.h"

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
    out.replicas.push_back(ReplicaInfo{replica.location(), replica.state(),
                                       replica.generation(), replica.readers(),
                                       replica.writers(), replica.bytes(),
                                       static_cast<uid_t>(replica.charged_uid())});
  }
  out.sync_state = info.sync_state();
  out.generation = info.generation();
  out.fill_failure = info.fill_failure();
  out.usage = FromProto(info.usage());
  out.placement = info.placement();
  out.retention = info.retention();
  out.numa_node = info.numa_node();
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
  return Recommendation{recommendation.subject(), recommendation.action(),
                        {recommendation.locations().begin(), recommendation.locations().end()},
                        recommendation.evidence(), recommendation.bytes()};
}

Leak FromProto(const v1::Leak& leak) {
  return Leak{leak.uid(),   leak.kind(), leak.subject(), leak.bytes(),
              absl::Seconds(leak.age_seconds()), leak.pid(), leak.evidence()};
}

LeakReport FromProto(const v1::LeaksReply& reply) {
  LeakReport report;
  for (const v1::Leak& leak : reply.leaks()) report.leaks.push_back(FromProto(leak));
  report.omitted = reply.omitted();
  return report;
}

SizeClassStats FromProto(const v1::SizeClassStats& size_class) {
  return SizeClassStats{size_class.bytes(), size_class.allocations(), size_class.cached()};
}

PoolStats FromProto(const v1::PoolStats& pool) {
  PoolStats out;
  out.location = pool.location();
  out.reserved_bytes = pool.reserved_bytes();
  out.used_bytes = pool.used_bytes();
  out.free_bytes = pool.free_bytes();
  out.peak_reserved_bytes = pool.peak_reserved_bytes();
  out.peak_used_bytes = pool.peak_used_bytes();
  out.hit_count = pool.hit_count();
  out.miss_count = pool.miss_count();
  out.largest_free_block_bytes = pool.largest_free_block_bytes();
  out.fragmentation = pool.fragmentation();
  out.segments = pool.segments();
  out.scrubbed_bytes = pool.scrubbed_bytes();
  out.trimmed_bytes = pool.trimmed_bytes();
  out.limit_bytes = pool.limit_bytes();
  for (const auto& size_class : pool.size_classes()) {
    out.size_classes.push_back(FromProto(size_class));
  }
  out.evictions = pool.evictions();
  out.evicted_bytes = pool.evicted_bytes();
  out.demotions = pool.demotions();
  out.demoted_bytes = pool.demoted_bytes();
  return out;
}

namespace {

std::string HandleTypeName(v1::HandleType type) {
  switch (type) {
    case v1::CUDA_IPC: return "ipc";
    case v1::LEVEL_ZERO_IPC: return "level_zero_ipc";
    default: return "vmm_fd";
  }
}

}  // namespace

DeviceInfo FromProto(const v1::DeviceInfo& device) {
  return DeviceInfo{device.ordinal(),
                    device.uuid(),
                    device.name(),
                    device.total_bytes(),
                    device.free_bytes(),
                    device.vmm(),
                    device.posix_fd(),
                    HandleTypeName(device.handle_type()),
                    // The daemon names what broke it, and nothing while healthy.
                    device.health_error().empty(),
                    device.health_error(),
                    // An older daemon serves CUDA only and does not say.
                    device.api().empty() ? "cuda" : device.api(),
                    device.pci_address(),
                    device.ipc(),
                    device.has_free(),
                    device.memd_bytes(),
                    device.outside_memd_bytes()};
}

TransferStats FromProto(const v1::TransferStats& stats) {
  return TransferStats{stats.active(),  stats.active_bytes(), stats.completed(),
                       stats.bytes(),   stats.failed(),       stats.retries(),
                       stats.rejected()};
}

DurabilityStats FromProto(const v1::DurabilityStats& durability) {
  DurabilityStats out;
  out.recording = durability.recording();
  out.not_recording = durability.not_recording();
  out.generation = durability.generation();
  out.recovered = durability.recovered();
  out.recovered_at = absl::FromUnixNanos(durability.recovered_unix_ns());
  out.recovery = absl::Nanoseconds(durability.recovery_ns());
  out.adopted_segments = durability.adopted_segments();
  out.adopted_buffers = durability.adopted_buffers();
  out.adopted_bytes = durability.adopted_bytes();
  out.lost_buffers = durability.lost_buffers();
  out.lost_segments = durability.lost_segments();
  return out;
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
    stats.memory_waits.push_back(MemoryWaits{waits.location(), waits.calls(), waits.bytes()});
  }
  return stats;
}

SessionInfo FromProto(const v1::SessionInfo& session) {
  return SessionInfo{session.id(),
                     static_cast<pid_t>(session.pid()),
                     session.uid(),
                     session.gid(),
                     session.command(),
                     session.lease_count(),
                     absl::FromUnixNanos(session.started_unix_ns()),
                     session.created_bytes()};
}

UidUsage FromProto(const v1::UidUsage& usage) {
  return UidUsage{usage.uid(), usage.location(), usage.bytes(), usage.buffers(),
                  usage.quota_bytes()};
}

}  // namespace memd::internal
