#include "client/src/client_core.h"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/paths.h"

namespace memd::internal {
namespace {

constexpr char kSessionMetadataKey[] = "memd-session";
// Sweep dead cache entries when the cache grows past this.
constexpr std::size_t kMappingSweepSize = 1024;

}  // namespace

Mapping::~Mapping() { ::munmap(base, length); }

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
  if (info.sealed_unix_ns() != 0) {
    out.sealed = absl::FromUnixNanos(info.sealed_unix_ns());
  }
  out.creator_pid = static_cast<pid_t>(info.creator_pid());
  return out;
}

absl::Status ClientCore::FromGrpc(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat(
        "memd at ", socket_dir_, " is unreachable: ", status.error_message()));
  }
  return absl::Status(code, status.error_message());
}

absl::StatusOr<std::shared_ptr<Connection>> ClientCore::Current() {
  absl::MutexLock lock(&mu_);
  if (connection_ != nullptr && !connection_->session->HungUp()) {
    return connection_;
  }
  return ConnectLocked();
}

absl::StatusOr<std::shared_ptr<Connection>> ClientCore::ConnectLocked() {
  connection_.reset();
  auto session = SessionChannel::Connect(socket_dir_, call_timeout_);
  if (!session.ok()) return session.status();
  auto connection = std::make_shared<Connection>();
  connection->session = std::move(*session);
  grpc::ChannelArguments arguments;
  // Local socket: reconnect quickly after a daemon restart.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  connection->channel = grpc::CreateCustomChannel(
      absl::StrCat("unix:", ControlSocketPath(socket_dir_)),
      grpc::InsecureChannelCredentials(), arguments);
  connection->stub = v1::Memd::NewStub(connection->channel);
  connection->generation = ++generations_;
  connection_ = connection;
  return connection;
}

void ClientCore::Prepare(const Connection& connection,
                         grpc::ClientContext& context,
                         absl::Duration extra) const {
  context.AddMetadata(kSessionMetadataKey, connection.session->token());
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(call_timeout_ + extra));
}

absl::StatusOr<Buffer> ClientCore::Adopt(const Connection& connection,
                                         const v1::Lease& lease) {
  const v1::Handle& handle = lease.handle();
  if (handle.type() != v1::HOST_MEMFD) {
    // The lease is useless here; give it back rather than leak it.
    (void)Release(connection.generation, lease.lease_id());
    return absl::UnimplementedError(absl::StrCat(
        "buffer '", lease.buffer().name(), "' comes as handle type ",
        v1::HandleType_Name(handle.type()), ", which this client cannot map"));
  }
  auto fd = connection.session->TakeFd(handle.fd_seq(), call_timeout_);
  if (!fd.ok()) {
    (void)Release(connection.generation, lease.lease_id());
    return fd.status();
  }
  const bool writable = lease.access() == v1::READ_WRITE;
  Buffer buffer;
  buffer.core_ = shared_from_this();
  buffer.info_ = FromProto(lease.buffer());
  buffer.access_ = writable ? Access::kReadWrite : Access::kRead;
  buffer.lease_ = lease.lease_id();
  buffer.session_generation_ = connection.generation;
  buffer.created_ = lease.created();

  MappingKey key{connection.generation, lease.buffer().id(), writable};
  absl::ReleasableMutexLock lock(&mu_);
  std::weak_ptr<Mapping>& cached = mappings_[key];
  buffer.mapping_ = cached.lock();
  if (buffer.mapping_ == nullptr) {
    void* base = ::mmap(nullptr, handle.mapped_bytes(),
                        PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED,
                        fd->get(), static_cast<off_t>(handle.offset()));
    if (base == MAP_FAILED) {
      absl::Status status = ErrnoStatus("mmap", errno);
      mappings_.erase(key);
      lock.Release();
      (void)Release(connection.generation, lease.lease_id());
      return status;
    }
    buffer.mapping_ =
        std::make_shared<Mapping>(base, handle.mapped_bytes(), writable);
    cached = buffer.mapping_;
    if (mappings_.size() > kMappingSweepSize) {
      for (auto it = mappings_.begin(); it != mappings_.end();) {
        if (it->second.expired()) {
          mappings_.erase(it++);
        } else {
          ++it;
        }
      }
    }
  }
  // The mapping holds the memory; the descriptor closes here.
  return buffer;
}

absl::Status ClientCore::Seal(std::uint64_t generation, std::uint64_t lease,
                              BufferInfo* info) {
  auto connection = Current();
  if (!connection.ok()) return connection.status();
  if ((*connection)->generation != generation) {
    return absl::NotFoundError(absl::StrCat(
        "lease ", lease, " ended with its session (the daemon restarted)"));
  }
  grpc::ClientContext context;
  Prepare(**connection, context);
  v1::SealRequest request;
  request.set_lease_id(lease);
  v1::SealReply reply;
  absl::Status status = FromGrpc((*connection)->stub->Seal(&context, request, &reply));
  if (status.ok()) *info = FromProto(reply.buffer());
  return status;
}

absl::Status ClientCore::Release(std::uint64_t generation, std::uint64_t lease) {
  std::shared_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    connection = connection_;
  }
  // A lease of an older session ended with it: nothing to tell the daemon.
  if (connection == nullptr || connection->generation != generation ||
      connection->session->HungUp()) {
    return absl::OkStatus();
  }
  grpc::ClientContext context;
  Prepare(*connection, context);
  v1::ReleaseRequest request;
  request.set_lease_id(lease);
  v1::ReleaseReply reply;
  return FromGrpc(connection->stub->Release(&context, request, &reply));
}

}  // namespace memd::internal
