#include "memd/client.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/client_core.h"
#include "client/src/convert.h"
#include "client/src/file_fill.h"
#include "client/src/staging.h"
#include "common/cpus.h"
#include "common/location.h"
#include "common/paths.h"
#include "common/status_macros.h"

namespace memd {

using internal::ClientCore;
using internal::Connection;
using internal::DaemonTrust;
using internal::DaemonUidFromEnvironment;
using internal::SessionChannel;

// ---- Buffer ----

Buffer::Buffer() = default;
Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (core_ != nullptr) (void)Release();
    core_ = std::move(other.core_);
    mapping_ = std::move(other.mapping_);
    device_import_ = std::move(other.device_import_);
    descriptor_ = std::move(other.descriptor_);
    device_pointer_ = std::exchange(other.device_pointer_, 0);
    info_ = std::move(other.info_);
    access_ = other.access_;
    lease_ = other.lease_;
    ticket_ = std::move(other.ticket_);
    created_ = other.created_;
  }
  return *this;
}

// Only a Buffer that holds a lease: Release of one that does not builds an
// error (its message allocated) for nothing.
Buffer::~Buffer() {
  if (core_ != nullptr) (void)Release();
}

std::span<const std::byte> Buffer::data() const {
  if (mapping_ == nullptr) return {};
  return {static_cast<const std::byte*>(mapping_->base), info_.size};
}

std::span<std::byte> Buffer::mutable_data() {
  if (mapping_ == nullptr || access_ != Access::kReadWrite) return {};
  return {static_cast<std::byte*>(mapping_->base), info_.size};
}

absl::Status Buffer::Seal() {
  if (core_ == nullptr) {
    return absl::FailedPreconditionError("this Buffer holds no lease");
  }
  absl::Status sealed = core_->Seal(*ticket_, &info_);
  if (sealed.ok()) descriptor_.reset();  // Nothing more to write through it.
  return sealed;
}

absl::Status Buffer::WriteFromFile(int fd, std::uint64_t file_offset, std::uint64_t length,
                                   std::uint64_t offset, int threads) {
  if (core_ == nullptr) return absl::FailedPreconditionError("this Buffer holds no lease");
  const std::string& name = info_.name;
  if (access_ != Access::kReadWrite || info_.state == BufferState::kSealed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer '", name, "' is ", access_ != Access::kReadWrite ? "open for reading" : "sealed",
        ": nothing writes to it"));
  }
  // Device memory has no mapping here: its bytes go through staging.
  const bool device = mapping_ == nullptr;
  if (!device && descriptor_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer '", name, "' keeps no descriptor: create or open it with keep_descriptor"));
  }
  if (offset > info_.size || length > info_.size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        length, " bytes at offset ", offset, " run past the end of buffer '", name, "' (",
        info_.size, " bytes)"));
  }
  if (length == 0) return absl::OkStatus();
  if (device) {
    // A Client on this Buffer's core: the staging and the copies are this
    // session's, as if the caller had made them.
    Client client(core_);
    return internal::WriteFileToDevice(client, *this, fd, file_offset, length, offset,
                                       std::max(threads, 0));
  }
  if (threads <= 0) threads = std::min(UsableCpus(), 8);
  return internal::SendFileInto(descriptor_->fd.get(), descriptor_->offset + offset, fd,
                                file_offset, length, threads);
}

absl::StatusOr<BufferInfo> Buffer::Sync() {
  if (core_ == nullptr) {
    return absl::FailedPreconditionError("this Buffer holds no lease");
  }
  return core_->Sync(*ticket_);
}

absl::Status Buffer::Release() {
  if (core_ == nullptr) {
    return absl::FailedPreconditionError(
        "this Buffer holds no lease (released already, or moved from)");
  }
  std::shared_ptr<ClientCore> core = std::move(core_);
  core_.reset();
  absl::Status status = core->Release(ticket_);
  ticket_.reset();
  mapping_.reset();
  device_import_.reset();
  descriptor_.reset();
  device_pointer_ = 0;
  return status;
}

int Buffer::device_ordinal() const { return device_import_->device; }

bool Buffer::level_zero() const {
  return device_import_ != nullptr && device_import_->level_zero;
}

// ---- Client ----

Client::Client(std::shared_ptr<ClientCore> core) : core_(std::move(core)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ConnectOptions options) {
  const std::vector<std::string> dirs = options.socket_dir.empty()
                                            ? ClientSocketDirs()
                                            : std::vector<std::string>{options.socket_dir};
  DaemonTrust trust{::geteuid(), options.daemon_uid};
  if (!trust.daemon_uid.has_value()) {
    auto from_environment = DaemonUidFromEnvironment();
    if (!from_environment.ok()) return from_environment.status();
    trust.daemon_uid = *from_environment;
  }
  // The directory found is this client's for good: after a restart the
  // same daemon's successor is there, and it is the one to reclaim from.
  auto first = SessionChannel::ConnectFirst(dirs, options.call_timeout, trust);
  if (!first.ok()) return first.status();
  auto core = std::make_shared<ClientCore>(std::move(first->socket_dir), options.call_timeout,
                                           options.mapping_cache_bytes,
                                           options.device_cache_bytes, trust,
                                           options.level_zero_context);
  core->Adopt(std::move(first->channel));
  return std::unique_ptr<Client>(new Client(std::move(core)));
}

std::uint64_t Client::session_id() const {
  auto connection = core_->Current();
  return connection.ok() ? (*connection)->session->id() : 0;
}

const std::string& Client::socket_dir() const { return core_->socket_dir(); }

namespace {

std::uint64_t WaitMillis(absl::Duration wait) {
  if (wait <= absl::ZeroDuration()) return 0;
  return static_cast<std::uint64_t>(absl::ToInt64Milliseconds(wait + absl::Nanoseconds(999999)));
}

// How long an Open or Prefetch call may take: `wait`, or kCopyWait for one
// that waits for a copy without a wait of its own; at least the memory wait
// (the daemon waits the longer of the two).
absl::Duration CallWait(absl::Duration wait, absl::Duration wait_for_memory,
                        bool waits_for_copy) {
  const bool copy_without_wait = waits_for_copy && wait <= absl::ZeroDuration();
  return std::max(copy_without_wait ? kCopyWait : wait, wait_for_memory);
}

// `mappable`: the list to send with location auto (MappableLocations).
void SetCreate(std::string_view name, std::uint64_t size, const CreateOptions& options,
               const std::vector<std::string>& mappable, v1::CreateRequest* request) {
  request->set_name(std::string(name));
  request->set_size_bytes(size);
  request->set_location(options.location);
  request->set_access_hint(options.access_hint);
  request->set_retention(options.retention);
  request->set_numa(options.numa);
  request->set_wait_for_memory_ms(WaitMillis(options.wait_for_memory));
  for (const std::string& location : mappable) request->add_mappable_locations(location);
  request->set_mode(options.mode);
  request->set_persistence(options.persistence == Persistence::kEphemeral
                               ? v1::EPHEMERAL
                               : v1::PERSISTENT);
  for (const auto& [key, value] : options.attrs) {
    v1::Attr* attr = request->add_attrs();
    attr->set_key(key);
    attr->set_value(value);
  }
}

// One unary call on `connection`: token, deadline, status.
template <typename Request, typename Reply, typename Method>
absl::Status CallOn(ClientCore& core, const Connection& connection,
                    Method method, const Request& request, Reply* reply,
                    absl::Duration extra = absl::ZeroDuration()) {
  grpc::ClientContext context;
  core.Prepare(connection, context, extra);
  return core.FromGrpc((connection.stub.get()->*method)(&context, request, reply));
}

// The same on the current connection, which `used` receives.
template <typename Request, typename Reply, typename Method>
absl::Status Call(ClientCore& core, Method method, const Request& request,
                  Reply* reply, std::shared_ptr<Connection>* used = nullptr,
                  absl::Duration extra = absl::ZeroDuration()) {
  auto connection = core.Current();
  if (!connection.ok()) return connection.status();
  if (used != nullptr) *used = *connection;
  return CallOn(core, **connection, method, request, reply, extra);
}

// Where this process can map a buffer, for location auto: the caller's
// list when it gave one (and for any other location, where the daemon
// refuses a list); else host, pinned and every GPU of memd's (`stats`,
// asked only when needed) that this process's CUDA sees, by UUID, since
// its numbering may differ from memd's. Without a CUDA driver here, or
// for a GPU this process does not see (a Level Zero one too, for now),
// nothing more: a buffer placed there could not be mapped.
absl::StatusOr<std::vector<std::string>> MappableLocations(
    const CreateOptions& options, internal::DeviceImports& devices,
    const std::function<absl::StatusOr<DaemonStats>()>& stats) {
  if (options.location != "auto" || !options.mappable_locations.empty()) {
    return options.mappable_locations;
  }
  std::vector<std::string> mappable = {"host", "pinned"};
  MEMD_ASSIGN_OR_RETURN(const DaemonStats daemon, stats());
  for (const DeviceInfo& device : daemon.devices) {
    absl::StatusOr<int> local = devices.OrdinalOf(device.uuid);
    if (absl::IsUnavailable(local.status())) break;  // No CUDA driver here.
    if (local.ok()) mappable.push_back(absl::StrCat("device:", device.ordinal));
  }
  return mappable;
}

}  // namespace

absl::StatusOr<Buffer> Client::Create(std::string_view name, std::uint64_t size,
                                      const CreateOptions& options) {
  MEMD_ASSIGN_OR_RETURN(const std::vector<std::string> mappable,
                        MappableLocations(options, core_->device_imports(),
                                          [this] { return Stats(); }));
  v1::CreateRequest request;
  SetCreate(name, size, options, mappable, &request);
  v1::Lease lease;
  std::shared_ptr<Connection> connection;
  absl::Status status = Call(*core_, &v1::Memd::Stub::Create, request, &lease,
                             &connection, options.wait_for_memory);
  if (!status.ok()) return status;
  return core_->Adopt(*connection, lease,
                      {.populate = options.populate, .keep_descriptor = options.keep_descriptor});
}

namespace {

// Whether an open waits (for its name, a copy to its location, or memory),
// and so goes over gRPC; one that does not goes over the session socket
// when memd takes calls there, else over gRPC too.
bool OpenWaits(const OpenOptions& options) {
  return WaitMillis(options.wait) > 0 || !options.location.empty() ||
         WaitMillis(options.wait_for_memory) > 0;
}

// Client::Open on `connection`. `unsent` (when given) is set when the open
// went to the session socket and the socket took no call.
absl::StatusOr<Buffer> OpenOn(internal::ClientCore& core, const Connection& connection,
                              std::string_view name, const OpenOptions& options,
                              bool* unsent) {
  v1::OpenRequest request;
  request.set_name(std::string(name));
  request.set_access(options.access == Access::kReadWrite ? v1::READ_WRITE
                                                          : v1::READ);
  request.set_wait_timeout_ms(WaitMillis(options.wait));
  if (options.owner.has_value()) request.set_owner_uid(*options.owner);
  if (!options.location.empty()) request.set_location(options.location);
  // A read-only mapping this process still has for the name (at that
  // location: each copy is memory of its own) spares the descriptor and the
  // mmap if the name still means the same buffer; held here so that it
  // cannot be dropped before the reply.
  const std::string cached_as = options.location.empty()
                                    ? request.name()
                                    : absl::StrCat(request.name(), "@", options.location);
  std::shared_ptr<internal::Mapping> mapped;
  // The same for device memory: an import kept, which needs no descriptor
  // and no import call; memd says when it frees the buffer.
  std::optional<internal::DeviceImports::Kept> kept;
  if (options.access == Access::kRead) {
    mapped = core.mappings().FindReadOnly(connection.generation, cached_as);
    internal::DeviceImports& devices = core.device_imports();
    if (mapped != nullptr) {
      request.set_mapped_buffer_id(mapped->buffer_id);
    } else if (devices.keep_bytes() > 0) {
      core.ForgetFreed(connection);
      kept = devices.FindKept(connection.generation, cached_as);
      if (kept.has_value()) request.set_mapped_buffer_id(kept->buffer_id);
    }
    request.set_notify_freed(devices.keep_bytes() > 0);
  }
  request.set_wait_for_memory_ms(WaitMillis(options.wait_for_memory));
  internal::ClientCore::AdoptHints hints{options.populate, options.keep_descriptor,
                                         std::move(mapped), cached_as, std::move(kept), {}};
  v1::Lease lease;
  // Without a wait, an open at a location still waits for its copy.
  if (!OpenWaits(options) && connection.session->takes_calls()) {
    MEMD_ASSIGN_OR_RETURN(hints.attached, core.CallSession(connection, SessionCallKind::kOpen,
                                                           request, &lease, unsent));
  } else {
    absl::Status status =
        CallOn(core, connection, &v1::Memd::Stub::Open, request, &lease,
               CallWait(options.wait, options.wait_for_memory, !options.location.empty()));
    if (!status.ok()) return status;
  }
  return core.Adopt(connection, lease, std::move(hints));
}

}  // namespace

absl::StatusOr<Buffer> Client::Open(std::string_view name,
                                    const OpenOptions& options) {
  // Over the session socket on the connection last made, without the poll
  // that asks whether memd hung up since (a system call an open: issue 28,
  // target 4). A hang-up shows when the socket takes no call; the open then
  // goes on the connection Current() makes, which reconnects.
  if (!OpenWaits(options)) {
    std::shared_ptr<Connection> last = core_->Last();
    if (last != nullptr && last->session->takes_calls()) {
      bool unsent = false;
      absl::StatusOr<Buffer> opened = OpenOn(*core_, *last, name, options, &unsent);
      if (!unsent) return opened;
    }
  }
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, core_->Current());
  return OpenOn(*core_, *connection, name, options, nullptr);
}

absl::StatusOr<Buffer> Client::OpenOrCreate(std::string_view name,
                                            std::uint64_t size,
                                            const CreateOptions& options,
                                            absl::Duration wait) {
  MEMD_ASSIGN_OR_RETURN(const std::vector<std::string> mappable,
                        MappableLocations(options, core_->device_imports(),
                                          [this] { return Stats(); }));
  v1::OpenOrCreateRequest request;
  SetCreate(name, size, options, mappable, request.mutable_create());
  request.set_wait_timeout_ms(WaitMillis(wait));
  if (options.existing_owner.has_value()) {
    request.set_owner_uid(*options.existing_owner);
  }
  v1::Lease lease;
  std::shared_ptr<Connection> connection;
  // The daemon waits the longer of the two (for whichever it waits for).
  absl::Status status = Call(*core_, &v1::Memd::Stub::OpenOrCreate, request,
                             &lease, &connection, std::max(wait, options.wait_for_memory));
  if (!status.ok()) return status;
  return core_->Adopt(*connection, lease,
                      {.populate = options.populate, .keep_descriptor = options.keep_descriptor});
}

absl::Status Client::Unlink(std::string_view name) { return Unlink(name, 0); }

absl::Status Client::Unlink(std::string_view name, std::uint64_t expected_id) {
  v1::UnlinkRequest request;
  request.set_name(std::string(name));
  request.set_expected_id(expected_id);
  v1::UnlinkReply reply;
  return Call(*core_, &v1::Memd::Stub::Unlink, request, &reply);
}

absl::StatusOr<BufferInfo> Client::Prefetch(std::string_view name, std::string_view location,
                                            const PrefetchOptions& options) {
  v1::PrefetchRequest request;
  request.set_name(std::string(name));
  request.set_location(std::string(location));
  request.set_wait_timeout_ms(WaitMillis(options.wait));
  request.set_wait_for_memory_ms(WaitMillis(options.wait_for_memory));
  if (options.owner.has_value()) request.set_owner_uid(*options.owner);
  v1::BufferInfo reply;
  // One that may wait for memory waits for the copy too, however long.
  absl::Status status = Call(*core_, &v1::Memd::Stub::Prefetch, request, &reply, nullptr,
                             CallWait(options.wait, options.wait_for_memory,
                                      options.wait_for_memory > absl::ZeroDuration()));
  if (!status.ok()) return status;
  return internal::FromProto(reply);
}

absl::StatusOr<BufferInfo> Client::DropReplica(std::string_view name,
                                               std::string_view location) {
  v1::DropReplicaRequest request;
  request.set_name(std::string(name));
  request.set_location(std::string(location));
  v1::BufferInfo reply;
  absl::Status status = Call(*core_, &v1::Memd::Stub::DropReplica, request, &reply);
  if (!status.ok()) return status;
  return internal::FromProto(reply);
}

absl::StatusOr<BufferInfo> Client::Stat(std::string_view name) {
  v1::StatRequest request;
  request.set_name(std::string(name));
  v1::BufferInfo reply;
  absl::Status status = Call(*core_, &v1::Memd::Stub::Stat, request, &reply);
  if (!status.ok()) return status;
  return internal::FromProto(reply);
}

absl::StatusOr<std::vector<BufferInfo>> Client::List(std::string_view prefix) {
  return List(prefix, ListOptions{});
}

absl::StatusOr<std::vector<BufferInfo>> Client::List(std::string_view prefix,
                                                     const ListOptions& options) {
  v1::ListRequest request;
  request.set_prefix(std::string(prefix));
  request.set_include_unlinked(options.include_unlinked);
  v1::ListReply reply;
  absl::Status status = Call(*core_, &v1::Memd::Stub::List, request, &reply);
  if (!status.ok()) return status;
  std::vector<BufferInfo> buffers;
  buffers.reserve(reply.buffers_size());
  for (const auto& info : reply.buffers()) buffers.push_back(internal::FromProto(info));
  return buffers;
}

absl::StatusOr<DaemonStats> Client::Stats() {
  v1::StatsRequest request;
  v1::StatsReply reply;
  absl::Status status = Call(*core_, &v1::Memd::Stub::Stats, request, &reply);
  if (!status.ok()) return status;
  return internal::FromProto(reply);
}

absl::StatusOr<int> Client::CudaDevice(std::string_view text) {
  const std::string location(text);
  absl::StatusOr<Location> parsed = Location::Parse(location);
  if (!parsed.ok() || parsed->kind != Location::Kind::kDevice) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", location, "' is not a GPU location (\"device:N\")"));
  }
  MEMD_ASSIGN_OR_RETURN(DaemonStats stats, Stats());
  for (const DeviceInfo& device : stats.devices) {
    if (device.ordinal != parsed->device) continue;
    absl::StatusOr<int> local = core_->device_imports().OrdinalOf(device.uuid);
    if (!local.ok() && !absl::IsNotFound(local.status())) return local.status();
    if (!local.ok()) {
      return absl::NotFoundError(absl::StrCat(location, ": ", local.status().message()));
    }
    return *local;
  }
  return absl::NotFoundError(absl::StrCat("memd serves no ", location, " (it serves ",
                                          stats.devices.size(), " GPUs)"));
}

absl::StatusOr<std::string> Client::DeviceLocation(int cuda_device) {
  MEMD_ASSIGN_OR_RETURN(std::string uuid, core_->device_imports().UuidOf(cuda_device));
  MEMD_ASSIGN_OR_RETURN(DaemonStats stats, Stats());
  for (const DeviceInfo& device : stats.devices) {
    if (device.uuid == uuid) return absl::StrCat("device:", device.ordinal);
  }
  return absl::NotFoundError(absl::StrCat("memd does not serve GPU ", uuid,
                                          " (this process's CUDA device ", cuda_device,
                                          "); it serves ", stats.devices.size(), " GPUs"));
}

absl::StatusOr<void*> Client::LevelZeroContext(const std::string& device_uuid) {
  return core_->ze_imports().Context(device_uuid);
}

absl::StatusOr<std::vector<UidUsage>> Client::Usage() {
  v1::UsageRequest request;
  v1::UsageReply reply;
  if (absl::Status status = Call(*core_, &v1::Memd::Stub::Usage, request, &reply);
      !status.ok()) {
    return status;
  }
  std::vector<UidUsage> usage;
  for (const auto& entry : reply.usage()) usage.push_back(internal::FromProto(entry));
  return usage;
}

absl::StatusOr<std::vector<Recommendation>> Client::Advise(std::string_view prefix) {
  v1::AdviseRequest request;
  request.set_prefix(std::string(prefix));
  v1::AdviseReply reply;
  if (absl::Status status = Call(*core_, &v1::Memd::Stub::Advise, request, &reply);
      !status.ok()) {
    return status;
  }
  std::vector<Recommendation> recommendations;
  for (const auto& r : reply.recommendations()) recommendations.push_back(internal::FromProto(r));
  return recommendations;
}

absl::StatusOr<LeakReport> Client::Leaks(const LeaksOptions& options) {
  if (options.older_than < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("older_than is ", absl::FormatDuration(options.older_than),
                     "; it must be 0 or more"));
  }
  v1::LeaksRequest request;
  // Set even at 0: unset would mean the daemon's default (an hour).
  request.set_older_than_seconds(static_cast<std::uint64_t>(
      absl::ToInt64Seconds(absl::Ceil(options.older_than, absl::Seconds(1)))));
  request.set_many_leases(options.many_leases);
  v1::LeaksReply reply;
  if (absl::Status status = Call(*core_, &v1::Memd::Stub::Leaks, request, &reply);
      !status.ok()) {
    return status;
  }
  return internal::FromProto(reply);
}

absl::StatusOr<std::vector<SessionInfo>> Client::Sessions() {
  v1::ListSessionsRequest request;
  v1::ListSessionsReply reply;
  absl::Status status =
      Call(*core_, &v1::Memd::Stub::ListSessions, request, &reply);
  if (!status.ok()) return status;
  std::vector<SessionInfo> sessions;
  for (const auto& session : reply.sessions()) sessions.push_back(internal::FromProto(session));
  return sessions;
}

absl::StatusOr<TransferList> Client::Transfers() {
  v1::ListTransfersReply reply;
  if (absl::Status status = Call(*core_, &v1::Memd::Stub::ListTransfers,
                                 v1::ListTransfersRequest(), &reply);
      !status.ok()) {
    return status;
  }
  return internal::FromProto(reply);
}

absl::StatusOr<std::vector<TrimmedPool>> Client::Trim(std::string_view location) {
  v1::TrimRequest request;
  request.set_location(std::string(location));
  v1::TrimReply reply;
  absl::Status status = Call(*core_, &v1::Memd::Stub::Trim, request, &reply);
  if (!status.ok()) return status;
  std::vector<TrimmedPool> trimmed;
  for (const auto& pool : reply.pools()) {
    trimmed.push_back(TrimmedPool{pool.location(), pool.released_bytes(),
                                  pool.has_driver_freed_bytes()
                                      ? std::optional<std::uint64_t>(pool.driver_freed_bytes())
                                      : std::nullopt});
  }
  return trimmed;
}

absl::Status Client::Ping() {
  v1::PingRequest request;
  v1::PingReply reply;
  return Call(*core_, &v1::Memd::Stub::Ping, request, &reply);
}

}  // namespace memd
