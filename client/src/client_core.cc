#include "client/src/client_core.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "client/src/convert.h"
#include "client/src/file_fill.h"
#include "common/errno_status.h"
#include "common/paths.h"

namespace memd::internal {
namespace {

constexpr char kSessionMetadataKey[] = "memd-session";

// The watcher's reconnect attempts while the daemon is away: the first
// after this long, then twice as long each time, up to kLastRetry. The
// daemon's grace period (30 s by default) leaves room for several.
constexpr absl::Duration kFirstRetry = absl::Milliseconds(100);
constexpr absl::Duration kLastRetry = absl::Seconds(2);
// How often the watcher reads memd's notices of freed buffers while device
// imports are kept: what such an import may hold after memd freed it.
constexpr absl::Duration kNoticePoll = absl::Milliseconds(100);

}  // namespace

ClientCore::~ClientCore() {
  std::thread watcher;
  pid_t started_in = -1;
  {
    PlainMutexLock lock(&tickets_mu_);
    watcher = std::move(watcher_);
    started_in = watcher_pid_;
  }
  if (!watcher.joinable()) return;
  stopping_.store(true);
  Wake();
  // A forked child has the thread's handle but not the thread: joining it
  // would wait for ever.
  if (::getpid() == started_in) {
    watcher.join();
  } else {
    watcher.detach();
  }
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
  PlainMutexLock lock(&mu_);
  if (connection_ != nullptr && !connection_->session->HungUp()) {
    return connection_;
  }
  return ConnectLocked();
}

std::shared_ptr<Connection> ClientCore::Last() {
  PlainMutexLock lock(&mu_);
  return connection_;
}

absl::StatusOr<std::shared_ptr<Connection>> ClientCore::ConnectLocked() {
  if (connection_ != nullptr) {
    // It hung up. Remembered until a connection succeeds, however many
    // tries that takes; a later hang-up replaces it (its leases could be
    // reclaimed only with its own token, and only from the next daemon).
    ended_ = EndedSession{connection_->generation, connection_->session->token()};
    connection_.reset();
  }
  auto session = SessionChannel::Connect(socket_dir_, call_timeout_, trust_);
  if (!session.ok()) return session.status();
  return UseLocked(std::move(*session));
}

void ClientCore::Adopt(std::unique_ptr<SessionChannel> session) {
  PlainMutexLock lock(&mu_);
  UseLocked(std::move(session));
}

std::shared_ptr<Connection> ClientCore::UseLocked(std::unique_ptr<SessionChannel> session) {
  auto connection = std::make_shared<Connection>();
  connection->session = std::move(session);
  grpc::ChannelArguments arguments;
  // Local socket: reconnect quickly after a daemon restart.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A channel of its own, not one from gRPC's process-wide pool: after memd
  // restarts, a new connection shared with another Client's stale one (same
  // target, same arguments) failed its first call with "Broken pipe"
  // (UpgradeTest.AnUpgradeUnderTheStoreKeepsThePidAndEveryBuffer).
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  connection->channel = grpc::CreateCustomChannel(
      // The directory the session's checks passed, links resolved.
      absl::StrCat("unix:", ControlSocketPath(connection->session->directory())),
      grpc::InsecureChannelCredentials(), arguments);
  connection->stub = v1::Memd::NewStub(connection->channel);
  connection->generation = ++generations_;
  connection_ = connection;
  if (ended_.has_value()) {
    const EndedSession ended = *std::move(ended_);
    ended_.reset();
    ReclaimLocked(ended, *connection);
  }
  return connection;
}

void ClientCore::ReclaimLocked(const EndedSession& ended,
                               const Connection& connection) {
  // The leases to ask for: each id once (one daemon's ids are unique; a
  // duplicate would make the daemon refuse the whole call).
  std::vector<std::shared_ptr<LeaseTicket>> held;
  {
    PlainMutexLock lock(&tickets_mu_);
    absl::flat_hash_set<std::uint64_t> ids;
    for (const auto& [key, weak] : tickets_) {
      std::shared_ptr<LeaseTicket> ticket = weak.lock();
      if (ticket != nullptr && ticket->generation.load() == ended.generation &&
          ids.insert(ticket->lease_id).second) {
        held.push_back(std::move(ticket));
      }
    }
  }
  for (std::size_t first = 0; first < held.size(); first += kReclaimBatch) {
    const std::size_t last = std::min(held.size(), first + kReclaimBatch);
    absl::flat_hash_map<std::uint64_t, std::shared_ptr<LeaseTicket>> batch;
    v1::ReclaimRequest request;
    request.set_previous_token(ended.token);
    for (std::size_t i = first; i < last; ++i) {
      request.add_lease_ids(held[i]->lease_id);
      batch.emplace(held[i]->lease_id, held[i]);
    }
    v1::ReclaimReply reply;
    grpc::ClientContext context;
    Prepare(connection, context);
    // UNIMPLEMENTED (a daemon that keeps no leases), UNAVAILABLE (it went
    // again), or anything else: what is not reclaimed ended with its
    // session, as before reclaiming existed; the call that reconnected goes
    // on regardless.
    if (!connection.stub->Reclaim(&context, request, &reply).ok()) return;
    // Leases whose Buffer let go while the call ran: the new session holds
    // them now, and nobody else will release them.
    std::vector<std::uint64_t> orphans;
    {
      PlainMutexLock lock(&tickets_mu_);
      for (std::uint64_t id : reply.reclaimed()) {
        auto found = batch.find(id);
        if (found == batch.end()) continue;  // Not asked for: not ours to keep.
        const std::shared_ptr<LeaseTicket>& ticket = found->second;
        if (tickets_.contains(ticket.get())) {
          ticket->generation.store(connection.generation);
        } else {
          orphans.push_back(id);
        }
        batch.erase(found);
      }
    }
    for (std::uint64_t id : orphans) {
      grpc::ClientContext release_context;
      Prepare(connection, release_context);
      v1::ReleaseRequest release;
      release.set_lease_id(id);
      v1::ReleaseReply released;
      (void)connection.stub->Release(&release_context, release, &released);
    }
  }
}

std::shared_ptr<LeaseTicket> ClientCore::Register(std::uint64_t lease,
                                                  std::uint64_t generation) {
  auto ticket = std::make_shared<LeaseTicket>(lease, generation);
  PlainMutexLock lock(&tickets_mu_);
  tickets_.emplace(ticket.get(), ticket);
  if (!watcher_.joinable()) {
    // Without an eventfd or a thread, the client reconnects at its next
    // call only, as it did before the watcher.
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (wake_) {
      try {
        watcher_ = std::thread([this] { Watch(); });
        watcher_pid_ = ::getpid();
      } catch (const std::system_error&) {
        wake_.reset();
      }
    }
  } else if (idle_.load()) {
    Wake();  // The watcher waits for a lease to exist (its session ended).
  }
  return ticket;
}

bool ClientCore::HoldsLeases() {
  PlainMutexLock lock(&tickets_mu_);
  absl::erase_if(tickets_, [](const auto& entry) { return entry.second.expired(); });
  return !tickets_.empty();
}

void ClientCore::Wake() {
  const std::uint64_t one = 1;
  // Fails only when the counter is full, and then the watcher wakes anyway.
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void ClientCore::WaitWake(absl::Duration timeout) {
  pollfd poll_fd{wake_.get(), POLLIN, 0};
  const int millis = timeout == absl::InfiniteDuration()
                         ? -1
                         : static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (::poll(&poll_fd, 1, millis) > 0) {
    std::uint64_t count = 0;
    (void)!::read(wake_.get(), &count, sizeof(count));
  }
}

void ClientCore::ForgetFreed(const Connection& connection) {
  std::vector<std::uint64_t> freed = connection.session->TakeFreed();
  if (!freed.empty()) device_imports_.Forget(connection.generation, freed);
}

void ClientCore::Watch() {
  absl::Duration retry = kFirstRetry;
  while (!stopping_.load()) {
    std::shared_ptr<Connection> connection;
    {
      PlainMutexLock lock(&mu_);
      connection = connection_;
    }
    if (connection != nullptr && !connection->session->HungUp()) {
      retry = kFirstRetry;
      // While it keeps device imports it looks for memd's notices of
      // buffers freed every kNoticePoll, so that a kept import goes while
      // nobody calls (calls read them too). Not at every packet: each
      // answer to a call would wake it.
      absl::StatusOr<SessionChannel::Event> event = connection->session->Wait(
          wake_.get(),
          device_imports_.kept_bytes() > 0 ? kNoticePoll : absl::InfiniteDuration());
      if (!event.ok()) {
        WaitWake(kLastRetry);  // poll itself fails: do not spin.
      } else if (*event == SessionChannel::Event::kWoken) {
        WaitWake(absl::ZeroDuration());  // Empty the eventfd.
      } else if (*event == SessionChannel::Event::kTimedOut) {
        if (!connection->session->DrainIfIdle().ok()) WaitWake(kLastRetry);
        ForgetFreed(*connection);
      }
      continue;
    }
    if (!HoldsLeases()) {
      // Nothing to reclaim: the next call reconnects, as it always did.
      // Kept imports go: a new daemon's ids mean other buffers, and it will
      // not say when it frees these. Idle until a lease registers (checked
      // again once idle_ is set, so that Register cannot miss it).
      device_imports_.ForgetAll();
      idle_.store(true);
      if (!HoldsLeases()) WaitWake(absl::InfiniteDuration());
      idle_.store(false);
      continue;
    }
    // The session ended: connect again and reclaim, as a call would.
    // Holds mu_ only inside Current, never while waiting to retry.
    if (Current().ok()) {
      retry = kFirstRetry;
      continue;
    }
    WaitWake(retry);
    retry = std::min(retry * 2, kLastRetry);
  }
}

absl::StatusOr<UniqueFd> ClientCore::CallSession(const Connection& connection,
                                                 SessionCallKind kind,
                                                 const google::protobuf::MessageLite& request,
                                                 google::protobuf::MessageLite* reply,
                                                 bool* unsent) {
  MEMD_ASSIGN_OR_RETURN(
      SessionChannel::Answer answer,
      connection.session->Call(kind, request.SerializeAsString(), call_timeout_, unsent));
  if (answer.answer.code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(answer.answer.code),
                        answer.answer.message);
  }
  if (!reply->ParseFromString(answer.answer.reply)) {
    return absl::DataLossError(absl::StrCat("memd's answer to ", SessionCallName(kind),
                                            " on the session socket is no ",
                                            reply->GetTypeName()));
  }
  return std::move(answer.fd);
}

void ClientCore::Prepare(const Connection& connection,
                         grpc::ClientContext& context,
                         absl::Duration extra) const {
  // Releases sent over the session socket are done before anything else
  // asks memd: a Stats or an Unlink sees them.
  (void)connection.session->SettleReleases(call_timeout_);
  context.AddMetadata(kSessionMetadataKey, connection.session->token());
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(call_timeout_ + extra));
}

absl::StatusOr<Buffer> ClientCore::Adopt(const Connection& connection,
                                         const v1::Lease& lease, AdoptHints hints) {
  const std::string& cache_name =
      hints.cached_as.empty() ? lease.buffer().name() : hints.cached_as;
  std::optional<DeviceImports::Kept>& kept = hints.kept;
  const v1::Handle& handle = lease.handle();
  // The descriptor came with the answer (the session socket's path), or
  // waits on the socket under its sequence number (gRPC's), or memd sent
  // none: the client maps the buffer already.
  const bool has_fd = hints.attached || handle.fd_seq() != 0;
  auto take_fd = [&]() -> absl::StatusOr<UniqueFd> {
    if (hints.attached) return std::move(hints.attached);
    return connection.session->TakeFd(handle.fd_seq(), call_timeout_);
  };
  const bool writable = lease.access() == v1::READ_WRITE;
  Buffer buffer;
  buffer.core_ = shared_from_this();
  buffer.info_ = FromProto(lease.buffer());
  buffer.access_ = writable ? Access::kReadWrite : Access::kRead;
  buffer.lease_ = lease.lease_id();
  buffer.ticket_ = Register(lease.lease_id(), connection.generation);
  buffer.created_ = lease.created();
  // A lease this client cannot use is given back rather than leaked: the
  // Buffer, destroyed on the way out, releases it.
  auto give_back = [](absl::Status status) { return status; };
  // Device memory: the segment is imported (or shared) and the buffer
  // lies at its offset; the import's kind follows the handle's.
  auto adopt_device = [&](auto device, auto& imports,
                          bool with_fd) -> absl::StatusOr<Buffer> {
    device.segment_id = handle.segment_id();
    device.segment_bytes = handle.segment_bytes();
    device.device = handle.device();
    device.device_uuid = handle.device_uuid();
    device.ipc_handle = handle.ipc_handle();
    if (with_fd) {
      auto fd = take_fd();
      if (!fd.ok()) return give_back(fd.status());
      device.fd = std::move(*fd);
    }
    auto import = imports.Import(connection.generation, std::move(device));
    if (!import.ok()) return give_back(import.status());
    buffer.device_pointer_ = (*import)->base + handle.offset();
    buffer.device_import_ = std::move(*import);
    return std::move(buffer);
  };
  if (handle.type() == v1::LEVEL_ZERO_IPC) {
    return adopt_device(ZeHandle{}, ze_imports_, /*with_fd=*/true);
  }
  if (handle.type() == v1::CUDA_VMM_FD || handle.type() == v1::CUDA_IPC) {
    const bool ipc = handle.type() == v1::CUDA_IPC;  // Bytes only, no descriptor.
    // No descriptor for a VMM segment: memd's answer to the kept import
    // the request named, which `kept` holds until the Buffer does.
    const bool with_fd = !ipc && has_fd;
    if (!ipc && !with_fd &&
        (!kept.has_value() || kept->buffer_id != lease.buffer().id() || writable)) {
      return give_back(absl::InternalError(absl::StrCat(
          "memd sent no descriptor for device buffer '", lease.buffer().name(),
          "', which this client does not keep imported")));
    }
    DeviceHandle device;
    device.ipc = ipc;
    device.writable = writable;
    absl::StatusOr<Buffer> made = adopt_device(std::move(device), device_imports_, with_fd);
    if (made.ok() && !writable) {
      const bool none_kept = device_imports_.kept_bytes() == 0;
      device_imports_.Keep(connection.generation, cache_name, lease.buffer().id(),
                           handle.mapped_bytes(), made->device_import_);
      // The watcher now looks for memd's notices too.
      if (none_kept && device_imports_.kept_bytes() > 0) Wake();
    }
    ForgetFreed(connection);  // TakeFd may have read notices.
    return made;
  }
  if (handle.type() != v1::HOST_MEMFD) {
    return give_back(absl::UnimplementedError(absl::StrCat(
        "buffer '", lease.buffer().name(), "' comes as handle type ",
        v1::HandleType_Name(handle.type()), ", which this client cannot map")));
  }
  const MappingCache::Key key{connection.generation, lease.buffer().id(), writable};
  std::shared_ptr<Mapping> mapping;
  std::shared_ptr<Mapping>& mapped = hints.mapped;
  if (!has_fd) {
    if (mapped == nullptr || mapped->buffer_id != key.buffer_id || writable) {
      return give_back(absl::InternalError(absl::StrCat(
          "memd sent no descriptor for buffer '", lease.buffer().name(),
          "', which this client does not map")));
    }
    mapping = std::move(mapped);
    mappings_.Touch(key, cache_name, mapping);
  } else {
    auto fd = take_fd();
    if (!fd.ok()) return give_back(fd.status());
    // The mapping holds the memory; the descriptor closes at the end of
    // this block, unless the Buffer keeps it.
    auto shared = mappings_.MapOrShare(key, cache_name, fd->get(),
                                       handle.offset(), handle.mapped_bytes(),
                                       hints.populate);
    if (!shared.ok()) return give_back(shared.status());
    mapping = std::move(*shared);
    if (hints.keep_descriptor && writable) {
      buffer.descriptor_ = std::make_shared<KeptDescriptor>(std::move(*fd), handle.offset());
    }
  }
  buffer.mapping_ = std::move(mapping);
  return buffer;
}

absl::StatusOr<std::shared_ptr<Connection>> ClientCore::ConnectionOf(
    const LeaseTicket& ticket) {
  // Current first: a reconnect it makes reclaims before the ticket is read.
  auto connection = Current();
  if (!connection.ok()) return connection.status();
  if ((*connection)->generation != ticket.generation.load()) {
    return absl::NotFoundError(absl::StrCat(
        "lease ", ticket.lease_id, " ended with its session (the daemon restarted)"));
  }
  return connection;
}

absl::Status ClientCore::Seal(const LeaseTicket& ticket, BufferInfo* info) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, ConnectionOf(ticket));
  if (connection->session->takes_calls()) {
    v1::SealRequest request;
    request.set_lease_id(ticket.lease_id);
    v1::SealReply reply;
    MEMD_RETURN_IF_ERROR(
        CallSession(*connection, SessionCallKind::kSeal, request, &reply).status());
    *info = FromProto(reply.buffer());
    return absl::OkStatus();
  }
  grpc::ClientContext context;
  Prepare(*connection, context);
  v1::SealRequest request;
  request.set_lease_id(ticket.lease_id);
  v1::SealReply reply;
  absl::Status status = FromGrpc(connection->stub->Seal(&context, request, &reply));
  if (status.ok()) *info = FromProto(reply.buffer());
  return status;
}

absl::StatusOr<BufferInfo> ClientCore::Sync(const LeaseTicket& ticket) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, ConnectionOf(ticket));
  grpc::ClientContext context;
  Prepare(*connection, context);
  v1::SyncRequest request;
  request.set_lease_id(ticket.lease_id);
  v1::BufferInfo reply;
  MEMD_RETURN_IF_ERROR(FromGrpc(connection->stub->Sync(&context, request, &reply)));
  return FromProto(reply);
}

absl::Status ClientCore::Release(const std::shared_ptr<LeaseTicket>& ticket) {
  std::uint64_t generation = 0;
  {
    // Once the ticket is gone from tickets_, a reclaim in flight gives its
    // lease back itself; until then, it moves the ticket first, and this
    // reads the generation it moved to.
    PlainMutexLock lock(&tickets_mu_);
    tickets_.erase(ticket.get());
    generation = ticket->generation.load();
  }
  const std::uint64_t lease = ticket->lease_id;
  std::shared_ptr<Connection> connection;
  {
    PlainMutexLock lock(&mu_);
    connection = connection_;
  }
  // A lease of an older session ended with it: nothing to tell the daemon.
  if (connection == nullptr || connection->generation != generation) {
    return absl::OkStatus();
  }
  v1::ReleaseRequest request;
  request.set_lease_id(lease);
  // Over the session socket without waiting for the outcome (the next call
  // there comes after it; Prepare settles it before any gRPC call); over
  // gRPC when memd does not take calls there or the socket is full.
  if (connection->session->takes_calls() &&
      connection->session->SendRelease(request.SerializeAsString()).ok()) {
    return absl::OkStatus();
  }
  // Asked only now, since a Release that went needs no poll: a session that
  // hung up ended its leases with it.
  if (connection->session->HungUp()) return absl::OkStatus();
  grpc::ClientContext context;
  Prepare(*connection, context);
  v1::ReleaseReply reply;
  return FromGrpc(connection->stub->Release(&context, request, &reply));
}

}  // namespace memd::internal
