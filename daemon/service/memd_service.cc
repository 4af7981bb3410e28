#include "daemon/service/memd_service.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/broker/permissions.h"
#include "daemon/service/convert.h"
#include "daemon/service/waiting_reactor.h"
#include "daemon/session/token_digest.h"
#include "google/protobuf/descriptor.h"
#include "spdlog/spdlog.h"

namespace memd::service {
namespace {

absl::Status ValidateWait(std::uint64_t wait_ms, const char* field = "wait_timeout_ms") {
  // Compared as integers: a duration made of 2^63 ms or more wraps negative.
  if (wait_ms > static_cast<std::uint64_t>(absl::ToInt64Milliseconds(kMaxOpenWait))) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " ", wait_ms, " exceeds the maximum of ",
        absl::ToInt64Milliseconds(kMaxOpenWait), " ms"));
  }
  return absl::OkStatus();
}

std::vector<std::string> DeviceUuids(const backend::Backend* backend) {
  std::vector<std::string> uuids;
  if (backend == nullptr) return uuids;
  for (const backend::DeviceInfo& device : backend->devices()) {
    if (device.ordinal >= static_cast<int>(uuids.size())) uuids.resize(device.ordinal + 1);
    uuids[device.ordinal] = device.uuid;
  }
  return uuids;
}

}  // namespace

MemdService::MemdService(broker::Broker& broker, const pool::PoolSet& pools,
                         const session::SessionServer& sessions,
                         DaemonInfo info, const backend::Backend* backend,
                         CallObserver* observer, transfer::Engine* engine)
    : broker_(broker),
      pools_(pools),
      sessions_(sessions),
      info_(std::move(info)),
      backend_(backend),
      device_uuids_(DeviceUuids(backend)),
      observer_(observer),
      copies_(broker, engine) {}

std::optional<PeerCredentials> MemdService::ConnectionPeer(
    const grpc::CallbackServerContext& context) const {
  // memd accepts control connections itself and hands their descriptors to
  // gRPC, which names such a peer "fd:N".
  const std::string peer = context.peer();
  absl::string_view number(peer);
  int fd = -1;
  if (!absl::ConsumePrefix(&number, "fd:") || !absl::SimpleAtoi(number, &fd)) {
    return std::nullopt;
  }
  return sessions_.ControlPeer(fd);
}

absl::StatusOr<std::shared_ptr<session::Session>> MemdService::Authenticate(
    grpc::CallbackServerContext* context) const {
  const auto& metadata = context->client_metadata();
  auto token = metadata.find(kSessionMetadataKey);
  if (token == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the call carries no '", kSessionMetadataKey,
        "' token; connect through the session socket first"));
  }
  std::shared_ptr<session::Session> session =
      sessions_.Find(absl::string_view(token->second.data(), token->second.size()));
  if (session == nullptr) {
    return absl::UnauthenticatedError(
        "the session token is unknown or its session has ended; reconnect");
  }
  // The token is a bearer secret: it counts only on a connection of the
  // session's own user.
  std::optional<PeerCredentials> caller = ConnectionPeer(*context);
  if (!caller.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "memd does not know who is on this connection (", context->peer(),
        "); connect to its control socket"));
  }
  if (caller->uid != session->peer().uid) {
    return absl::UnauthenticatedError(absl::StrCat(
        "this connection is uid ", caller->uid, "'s, but the token belongs to "
        "a session of uid ", session->peer().uid,
        "; a token is good only for its own user"));
  }
  return session;
}

absl::Status MemdService::Deliver(session::Session& session,
                                  broker::Grant grant,
                                  std::uint64_t mapped_buffer_id,
                                  v1::Lease* reply) {
  std::uint64_t seq = 0;
  if (NeedsDescriptor(grant, mapped_buffer_id)) {
    auto sent = session.SendFd(grant.handle.fd);
    if (!sent.ok()) return UndoGrant(session, grant, sent.status());
    seq = *sent;
  }
  FillLease(grant, seq, reply);
  return absl::OkStatus();
}

bool MemdService::NeedsDescriptor(const broker::Grant& grant, std::uint64_t mapped_buffer_id) {
  // The buffer's memory never changes while its id lives, so a client that
  // still maps this id needs no new descriptor.
  return grant.handle.fd >= 0 && mapped_buffer_id != grant.buffer.id;
}

absl::Status MemdService::UndoGrant(session::Session& session, const broker::Grant& grant,
                                    const absl::Status& send_failed) {
  absl::Status released = broker_.Release(session.id(), grant.lease);
  if (!released.ok()) spdlog::debug("undo lease: {}", released.ToString());
  // RESOURCE_EXHAUSTED (too many unread) stays so: the client must read;
  // anything else means it is gone or not reading at all.
  const absl::StatusCode code = absl::IsResourceExhausted(send_failed)
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kUnavailable;
  return absl::Status(code, absl::StrCat("could not pass the buffer's descriptor to the client: ",
                                         send_failed.message()));
}

void MemdService::FillLease(const broker::Grant& grant, std::uint64_t fd_seq,
                            v1::Lease* reply) const {
  reply->set_lease_id(grant.lease);
  reply->set_access(ToProto(grant.access));
  reply->set_created(grant.created);
  ToProto(grant.buffer, reply->mutable_buffer());
  v1::Handle* handle = reply->mutable_handle();
  handle->set_type(ToProto(grant.handle.type));
  handle->set_fd_seq(fd_seq);
  handle->set_offset(grant.offset);
  handle->set_mapped_bytes(grant.mapped_bytes);
  handle->set_segment_id(grant.segment_id);
  handle->set_segment_bytes(grant.segment_bytes);
  handle->set_ipc_handle(grant.handle.opaque);
  if (grant.buffer.location.kind == Location::Kind::kDevice) {
    const int device = grant.buffer.location.device;
    handle->set_device(device);
    if (device >= 0 && device < static_cast<int>(device_uuids_.size())) {
      handle->set_device_uuid(device_uuids_[device]);
    }
  }
}

std::vector<std::string> MemdService::MethodNames() {
  std::vector<std::string> names;
  const google::protobuf::ServiceDescriptor* memd =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::Memd::service_full_name());
  for (int i = 0; memd != nullptr && i < memd->method_count(); ++i) {
    names.push_back(memd->method(i)->name());
  }
  return names;
}

grpc::ServerUnaryReactor* MemdService::Respond(
    grpc::CallbackServerContext* context, const char* method,
    absl::FunctionRef<absl::Status()> body) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = body();
  if (!status.ok()) spdlog::debug("{} failed: {}", method, status.ToString());
  Observe(method, status.code(), start);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

void MemdService::Observe(const char* method, absl::StatusCode code,
                          absl::Time start) const {
  if (observer_ != nullptr) observer_->Observe(method, code, absl::Now() - start);
}

// A waiting Open-like call in gRPC: what delivering its grant takes, and how
// it ends; WaitingReactor does the rest.
class MemdService::WaitingCall final : public WaitingReactor<WaitingOpen> {
 public:
  WaitingCall(MemdService& service, const char* method,
              std::shared_ptr<session::Session> session, GrantDelivery deliver)
      : service_(service),
        method_(method),
        start_(absl::Now()),
        session_(std::move(session)),
        deliver_(std::move(deliver)) {}

  // Waits for `request` until `wait` has passed, for memory at most
  // `memory_wait` of it.
  void Wait(OpenRequest request, absl::Duration wait,
            std::optional<absl::Duration> memory_wait = std::nullopt) {
    const std::string name =
        std::visit([](const auto& params) { return params.name; }, request);
    Begin(std::make_shared<WaitingOpen>(
        std::make_unique<BrokerOpener>(service_.broker_, session_->id(), std::move(request)),
        name, wait, *this, memory_wait));
  }

  absl::Status Deliver(broker::Grant grant) override {
    return deliver_(*session_, std::move(grant));
  }
  void End(const absl::Status& status) override {
    service_.Observe(method_, status.code(), start_);
    Answer(status);
  }

 private:
  MemdService& service_;
  const char* const method_;
  const absl::Time start_;
  const std::shared_ptr<session::Session> session_;
  const GrantDelivery deliver_;
};

grpc::ServerUnaryReactor* MemdService::OpenMaybeWaiting(
    grpc::CallbackServerContext* context, const char* method, OpenRequest request,
    std::uint64_t wait_ms, bool for_copy, GrantDelivery deliver,
    std::optional<absl::Duration> memory_wait) {
  auto session = Authenticate(context);
  absl::Status valid = session.ok() ? ValidateWait(wait_ms) : session.status();
  if (!valid.ok() || wait_ms == 0) {
    // Without a wake the broker answers at once: a grant, or why not. An
    // open at a location that would only wait for a copy goes on waiting
    // below; the rest (a copy that is there: the common case) is answered
    // here, without a waiting call's cost.
    absl::StatusOr<std::optional<broker::Grant>> grant =
        valid.ok() ? AskBroker(broker_, (*session)->id(), request, 0, nullptr) : valid;
    if (!for_copy || !valid.ok() || !broker::OpenWouldWait(grant.status())) {
      return Respond(context, method, [&]() -> absl::Status {
        MEMD_RETURN_IF_ERROR(grant.status());
        return deliver(**session, std::move(**grant));
      });
    }
  }
  // An open at a location waits for the copy there to be made however long
  // the copy takes (the engine fails a copy that stalls): without a wait
  // timeout it waits for nothing else (OpenParams::wait_for_seal).
  const absl::Duration wait = wait_ms == 0 ? kMaxOpenWait : absl::Milliseconds(wait_ms);
  auto* call = new WaitingCall(*this, method, std::move(*session), std::move(deliver));
  call->Wait(std::move(request), wait, memory_wait);
  return call;
}

MemdService::GrantDelivery MemdService::LeaseDelivery(std::uint64_t mapped_buffer_id,
                                                      v1::Lease* reply) {
  return [this, mapped_buffer_id, reply](session::Session& session, broker::Grant grant) {
    return Deliver(session, std::move(grant), mapped_buffer_id, reply);
  };
}

grpc::ServerUnaryReactor* MemdService::Create(grpc::CallbackServerContext* context,
                                              const v1::CreateRequest* request,
                                              v1::Lease* reply) {
  if (request->wait_for_memory_ms() == 0) {
    return Respond(context, "Create", [&]() -> absl::Status {
      MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
      MEMD_ASSIGN_OR_RETURN(broker::CreateParams params, FromProto(*request));
      MEMD_ASSIGN_OR_RETURN(broker::Grant grant, broker_.Create(session->id(), params));
      return Deliver(*session, std::move(grant), 0, reply);
    });
  }
  // A create that may wait for memory: answered by a waiting call, which
  // holds no thread while the location stays full.
  auto session = Authenticate(context);
  absl::StatusOr<broker::CreateParams> params =
      session.ok() ? FromProto(*request) : session.status();
  absl::Status valid = params.status();
  if (valid.ok()) valid = ValidateWait(request->wait_for_memory_ms(), "wait_for_memory_ms");
  if (!valid.ok()) return Respond(context, "Create", [&] { return valid; });
  auto* call = new WaitingCall(*this, "Create", std::move(*session), LeaseDelivery(0, reply));
  call->Wait(WaitForMemory{std::move(*params)},
             absl::Milliseconds(request->wait_for_memory_ms()));
  return call;
}

grpc::ServerUnaryReactor* MemdService::Open(grpc::CallbackServerContext* context,
                                            const v1::OpenRequest* request,
                                            v1::Lease* reply) {
  auto params = FromProto(*request);
  if (!params.ok()) {
    return Respond(context, "Open", [&] { return params.status(); });
  }
  const bool for_copy = params->location.has_value();
  params->wait_for_seal = request->wait_timeout_ms() > 0;
  const std::uint64_t memory_ms = request->wait_for_memory_ms();
  if (memory_ms == 0) {
    return OpenMaybeWaiting(context, "Open", std::move(*params), request->wait_timeout_ms(),
                            for_copy, LeaseDelivery(request->mapped_buffer_id(), reply));
  }
  if (!for_copy) {
    return Respond(context, "Open", [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          "wait_for_memory_ms ", memory_ms, " needs a location: only an open at a location "
          "makes a copy that may wait for memory there; buffer '", params->name,
          "' is opened where it is"));
    });
  }
  return CopyWaitingForMemoryCall(context, "Open", std::move(*params),
                                  request->wait_timeout_ms(), memory_ms,
                                  LeaseDelivery(request->mapped_buffer_id(), reply));
}

grpc::ServerUnaryReactor* MemdService::CopyWaitingForMemoryCall(
    grpc::CallbackServerContext* context, const char* method, broker::OpenParams params,
    std::uint64_t wait_ms, std::uint64_t memory_ms, GrantDelivery deliver) {
  absl::Status valid = ValidateWait(wait_ms);
  if (valid.ok()) valid = ValidateWait(memory_ms, "wait_for_memory_ms");
  if (!valid.ok()) return Respond(context, method, [&] { return valid; });
  // It waits for memory at most memory_ms, and in all at most the longer
  // of its two waits (without wait_timeout_ms: as long as its copy takes).
  return OpenMaybeWaiting(context, method, CopyWaitingForMemory{std::move(params)},
                          wait_ms == 0 ? 0 : std::max(wait_ms, memory_ms), /*for_copy=*/true,
                          std::move(deliver), absl::Milliseconds(memory_ms));
}

grpc::ServerUnaryReactor* MemdService::OpenOrCreate(
    grpc::CallbackServerContext* context, const v1::OpenOrCreateRequest* request,
    v1::Lease* reply) {
  auto params = FromProto(*request);
  const std::uint64_t memory_ms = request->create().wait_for_memory_ms();
  absl::Status valid = params.status();
  if (valid.ok()) valid = ValidateWait(memory_ms, "wait_for_memory_ms");
  if (!valid.ok()) return Respond(context, "OpenOrCreate", [&] { return valid; });
  if (memory_ms == 0) {
    return OpenMaybeWaiting(context, "OpenOrCreate", std::move(*params),
                            request->wait_timeout_ms(), /*for_copy=*/false,
                            LeaseDelivery(0, reply));
  }
  // It may wait for memory, at most memory_ms, and for a seal only when it
  // asked to: the call waits at most the longer of its two waits.
  params->wait_for_seal = request->wait_timeout_ms() > 0;
  return OpenMaybeWaiting(context, "OpenOrCreate", OpenOrCreateWaitingForMemory{std::move(*params)},
                          std::max(request->wait_timeout_ms(), memory_ms), /*for_copy=*/false,
                          LeaseDelivery(0, reply), absl::Milliseconds(memory_ms));
}

grpc::ServerUnaryReactor* MemdService::Seal(grpc::CallbackServerContext* context,
                                            const v1::SealRequest* request,
                                            v1::SealReply* reply) {
  return Respond(context, "Seal", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    return SealLease(session->id(), *request, reply);
  });
}

absl::Status MemdService::SealLease(broker::SessionId session, const v1::SealRequest& request,
                                    v1::SealReply* reply) {
  absl::StatusOr<broker::BufferInfo> info = broker_.Seal(session, request.lease_id());
  if (!info.ok()) return copies_.WithWritingTransfers(session, info.status());
  ToProto(*info, reply->mutable_buffer());
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* MemdService::Release(grpc::CallbackServerContext* context,
                                               const v1::ReleaseRequest* request,
                                               v1::ReleaseReply* reply) {
  return Respond(context, "Release", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    return broker_.Release(session->id(), request->lease_id());
  });
}

grpc::ServerUnaryReactor* MemdService::Reclaim(grpc::CallbackServerContext* context,
                                               const v1::ReclaimRequest* request,
                                               v1::ReclaimReply* reply) {
  return Respond(context, "Reclaim", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    // memd's tokens are 32 hex digits; anything far longer is no token.
    constexpr std::size_t kMaxTokenBytes = 256;
    if (request->previous_token().size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "previous_token of ", request->previous_token().size(),
          " bytes is no session token (memd's are 32; at most ", kMaxTokenBytes,
          " are taken)"));
    }
    const std::vector<broker::LeaseId> leases(request->lease_ids().begin(),
                                              request->lease_ids().end());
    MEMD_ASSIGN_OR_RETURN(
        auto outcomes,
        broker_.Reclaim(session->id(), session::TokenDigest(request->previous_token()), leases));
    for (const broker::Broker::ReclaimOutcome& outcome : outcomes) {
      if (outcome.status.ok()) {
        reply->add_reclaimed(outcome.lease);
        continue;
      }
      v1::LeaseRefusal* refused = reply->add_refused();
      refused->set_lease_id(outcome.lease);
      refused->set_code(static_cast<int>(outcome.status.code()));
      refused->set_message(std::string(outcome.status.message()));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Unlink(grpc::CallbackServerContext* context,
                                              const v1::UnlinkRequest* request,
                                              v1::UnlinkReply* reply) {
  return Respond(context, "Unlink", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    return broker_.Unlink(session->id(), request->name(), request->expected_id());
  });
}

grpc::ServerUnaryReactor* MemdService::List(grpc::CallbackServerContext* context,
                                            const v1::ListRequest* request,
                                            v1::ListReply* reply) {
  return Respond(context, "List", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(auto buffers, broker_.List(session->id(), request->prefix(),
                                                     request->include_unlinked()));
    for (const auto& info : buffers) ToProto(info, reply->add_buffers());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Stat(grpc::CallbackServerContext* context,
                                            const v1::StatRequest* request,
                                            v1::BufferInfo* reply) {
  return Respond(context, "Stat", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(auto info, broker_.Stat(session->id(), request->name()));
    ToProto(info, reply);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Stats(grpc::CallbackServerContext* context,
                                             const v1::StatsRequest* request,
                                             v1::StatsReply* reply) {
  return Respond(context, "Stats", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    // Root sees the daemon; anyone else its own uid's activity, as Usage
    // and ListSessions answer (docs/security.md).
    const std::optional<uid_t> only =
        session->peer().uid == 0 ? std::nullopt : std::optional<uid_t>(session->peer().uid);
    reply->set_daemon_wide(!only.has_value());
    reply->set_version(info_.version);
    reply->set_backend(info_.backend);
    reply->set_metrics_address(info_.metrics_address);
    reply->set_started_unix_ns(absl::ToUnixNanos(info_.started));
    ToProto(info_.durability, reply->mutable_durability());
    ToProto(broker_.Grace(), reply->mutable_durability());
    const std::vector<pool::PoolStats> pools = pools_.Stats();
    const std::map<std::string, broker::PressureCounts> pressure = broker_.Pressure();
    for (const auto& stats : pools) {
      v1::PoolStats* out = reply->add_pools();
      ToProto(stats, out);
      if (auto taken = pressure.find(out->location()); taken != pressure.end()) {
        ToProto(taken->second, out);
      }
    }
    if (backend_ != nullptr) {
      for (const auto& device : backend_->devices()) {
        v1::DeviceInfo* out = reply->add_devices();
        ToProto(device, out);
        ToProto(pool::AccountDevice(device, pools), out);
      }
    }
    broker::BrokerCounts counts = only ? broker_.CountsOf(*only) : broker_.Counts();
    reply->set_buffers(counts.buffers);
    reply->set_sessions(counts.sessions);
    reply->set_leases(counts.leases);
    reply->set_waits(counts.waits);
    for (const auto& [location, waits] : counts.memory_waits) {
      v1::MemoryWaits* out = reply->add_memory_waits();
      out->set_location(location);
      out->set_calls(waits.calls);
      out->set_bytes(waits.bytes);
    }
    TransferStatsInto(only, reply);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::ListSessions(
    grpc::CallbackServerContext* context, const v1::ListSessionsRequest* request,
    v1::ListSessionsReply* reply) {
  return Respond(context, "ListSessions", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(auto sessions, broker_.Sessions(session->id()));
    for (const auto& info : sessions) ToProto(info, reply->add_sessions());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Usage(grpc::CallbackServerContext* context,
                                             const v1::UsageRequest* request,
                                             v1::UsageReply* reply) {
  return Respond(context, "Usage", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(auto usage, broker_.Usage(session->id()));
    for (const auto& entry : usage) ToProto(entry, reply->add_usage());
    return absl::OkStatus();
  });
}

std::optional<std::uint64_t> MemdService::DriverFree(const Location& location) const {
  if (backend_ == nullptr || location.kind != Location::Kind::kDevice) return std::nullopt;
  for (const backend::DeviceInfo& device : backend_->devices()) {
    if (device.ordinal == location.device && device.has_free) return device.free_bytes;
  }
  return std::nullopt;
}

grpc::ServerUnaryReactor* MemdService::Trim(grpc::CallbackServerContext* context,
                                            const v1::TrimRequest* request,
                                            v1::TrimReply* reply) {
  return Respond(context, "Trim", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_RETURN_IF_ERROR(broker::MayTrim(session->peer().uid, ::geteuid()));
    std::vector<pool::Pool*> chosen;
    if (request->location().empty()) {
      chosen = pools_.All();
    } else {
      MEMD_ASSIGN_OR_RETURN(Location location, Location::Parse(request->location()));
      pool::Pool* pool = pools_.Find(location);
      if (pool == nullptr) {
        return absl::NotFoundError(absl::StrCat(
            "no pool at ", location.ToString(), " on this node (pools: ",
            pools_.LocationNames(), ")"));
      }
      chosen.push_back(pool);
    }
    for (pool::Pool* pool : chosen) {
      v1::TrimmedPool* trimmed = reply->add_pools();
      trimmed->set_location(pool->location().ToString());
      // "Freed" as the driver sees it: what memd gives back stays used
      // while clients' imports hold it.
      const std::optional<std::uint64_t> free_before = DriverFree(pool->location());
      trimmed->set_released_bytes(pool->Trim(absl::ZeroDuration()));
      const std::optional<std::uint64_t> free_after = DriverFree(pool->location());
      if (free_before.has_value() && free_after.has_value()) {
        trimmed->set_driver_freed_bytes(
            *free_after > *free_before ? *free_after - *free_before : 0);
      }
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Ping(grpc::CallbackServerContext* context,
                                            const v1::PingRequest* request,
                                            v1::PingReply* reply) {
  return Respond(context, "Ping", [&] {
    reply->set_payload(request->payload());
    return absl::OkStatus();
  });
}

}  // namespace memd::service
