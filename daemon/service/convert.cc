#include "daemon/service/convert.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

v1::HandleType ToProto(backend::HandleType type) {
  switch (type) {
    case backend::HandleType::kHostMemfd: return v1::HOST_MEMFD;
    case backend::HandleType::kCudaVmmFd: return v1::CUDA_VMM_FD;
    case backend::HandleType::kCudaIpc: return v1::CUDA_IPC;
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
}

absl::StatusOr<broker::CreateParams> FromProto(const v1::CreateRequest& request) {
  broker::CreateParams params;
  params.name = request.name();
  params.size = request.size_bytes();
  MEMD_ASSIGN_OR_RETURN(params.location, Location::Parse(request.location()));
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
  return params;
}

absl::StatusOr<broker::CreateParams> FromProto(const v1::OpenOrCreateRequest& request) {
  MEMD_ASSIGN_OR_RETURN(broker::CreateParams params, FromProto(request.create()));
  if (request.has_owner_uid()) params.expected_owner = request.owner_uid();
  return params;
}

}  // namespace memd::service
