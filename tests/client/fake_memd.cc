#include "tests/client/fake_memd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"

namespace memd::test {
namespace {

constexpr std::uint64_t kPage = 4096;

grpc::Status NotHeld(std::uint64_t lease_id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("lease ", lease_id, " is not held by this session"));
}

grpc::Status NoSession() {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no session with this token");
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeMemd>> FakeMemd::Start(const std::string& socket_dir) {
  std::unique_ptr<FakeMemd> fake(new FakeMemd());
  auto listener = ListenUnix(SessionSocketPath(socket_dir), SOCK_SEQPACKET, 0600);
  if (!listener.ok()) return listener.status();
  fake->listener_ = std::move(*listener);
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  fake->stop_[0] = UniqueFd(ends[0]);
  fake->stop_[1] = UniqueFd(ends[1]);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + ControlSocketPath(socket_dir),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(fake.get());
  fake->server_ = builder.BuildAndStart();
  if (fake->server_ == nullptr) {
    return absl::InternalError(absl::StrCat("no gRPC server on ", socket_dir));
  }
  fake->acceptor_ = std::thread([raw = fake.get()] { raw->Accept(); });
  return fake;
}

std::string FakeMemd::Token(std::uint64_t session_id) {
  return absl::StrCat("fake-token-", session_id);
}

FakeMemd::~FakeMemd() {
  (void)!::write(stop_[1].get(), "x", 1);
  if (acceptor_.joinable()) acceptor_.join();
  if (server_ != nullptr) server_->Shutdown();
}

void FakeMemd::Accept() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_[0].get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    UniqueFd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!socket) continue;
    absl::MutexLock lock(&mu_);
    SessionHello hello;
    // Version 1: this fake takes every call over gRPC, none on the session
    // socket, as memd before the fast control path did.
    hello.protocol_version = 1;
    hello.session_id = ++next_session_;
    hello.token = Token(hello.session_id);
    if (!SendPacket(socket.get(), EncodeSessionMessage(hello), -1).ok()) continue;
    sessions_[hello.token] = Session{hello.session_id, hello.token, std::move(socket)};
  }
}

FakeMemd::Session* FakeMemd::CallerLocked(const grpc::ServerContext& context) {
  auto token = context.client_metadata().find("memd-session");
  if (token == context.client_metadata().end()) return nullptr;
  auto found = sessions_.find(std::string(token->second.data(), token->second.size()));
  if (found == sessions_.end() || !found->second.socket) return nullptr;
  return &found->second;
}

void FakeMemd::HangUp() {
  absl::MutexLock lock(&mu_);
  for (auto& [token, session] : sessions_) session.socket.reset();
}

void FakeMemd::Refuse(std::uint64_t lease_id) {
  absl::MutexLock lock(&mu_);
  refused_.insert(lease_id);
}

void FakeMemd::FailReclaim(grpc::Status status) {
  absl::MutexLock lock(&mu_);
  reclaim_status_ = std::move(status);
}

std::vector<v1::ReclaimRequest> FakeMemd::reclaims() const {
  absl::MutexLock lock(&mu_);
  return reclaims_;
}

std::size_t FakeMemd::live_sessions() const {
  absl::MutexLock lock(&mu_);
  std::size_t live = 0;
  for (const auto& [token, session] : sessions_) live += session.socket ? 1 : 0;
  return live;
}

std::uint64_t FakeMemd::holder(std::uint64_t lease_id) const {
  absl::MutexLock lock(&mu_);
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) return 0;
  auto session = sessions_.find(lease->second);
  return session == sessions_.end() ? 0 : session->second.id;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> FakeMemd::sealed() const {
  absl::MutexLock lock(&mu_);
  return sealed_;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> FakeMemd::released() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

grpc::Status FakeMemd::Create(grpc::ServerContext* context, const v1::CreateRequest* request,
                              v1::Lease* lease) {
  absl::MutexLock lock(&mu_);
  Session* session = CallerLocked(*context);
  if (session == nullptr) return NoSession();
  const std::uint64_t mapped = (request->size_bytes() + kPage - 1) / kPage * kPage;
  UniqueFd memory(::memfd_create("fake-memd", MFD_CLOEXEC));
  if (!memory || ::ftruncate(memory.get(), static_cast<off_t>(mapped)) != 0) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::strerror(errno));
  }
  const std::uint64_t seq = ++next_seq_;
  if (!SendPacket(session->socket.get(), EncodeSessionMessage(SessionFd{seq}), memory.get())
           .ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the session socket is gone");
  }
  const std::uint64_t id = ++next_lease_;
  leases_[id] = session->token;
  lease->set_lease_id(id);
  lease->set_access(v1::READ_WRITE);
  lease->set_created(true);
  v1::BufferInfo* info = lease->mutable_buffer();
  info->set_name(request->name());
  info->set_id(id);
  info->set_size_bytes(request->size_bytes());
  info->set_location("host");
  v1::Handle* handle = lease->mutable_handle();
  handle->set_type(v1::HOST_MEMFD);
  handle->set_fd_seq(seq);
  handle->set_mapped_bytes(mapped);
  handle->set_segment_id(id);
  handle->set_segment_bytes(mapped);
  return grpc::Status::OK;
}

grpc::Status FakeMemd::HolderLocked(const grpc::ServerContext& context,
                                    std::uint64_t lease_id, Session** holder) {
  Session* session = CallerLocked(context);
  if (session == nullptr) return NoSession();
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end() || lease->second != session->token) return NotHeld(lease_id);
  *holder = session;
  return grpc::Status::OK;
}

grpc::Status FakeMemd::Seal(grpc::ServerContext* context, const v1::SealRequest* request,
                            v1::SealReply* reply) {
  absl::MutexLock lock(&mu_);
  Session* session = nullptr;
  if (grpc::Status held = HolderLocked(*context, request->lease_id(), &session); !held.ok()) {
    return held;
  }
  sealed_.emplace_back(request->lease_id(), session->id);
  reply->mutable_buffer()->set_id(request->lease_id());
  reply->mutable_buffer()->set_state(v1::SEALED);
  return grpc::Status::OK;
}

grpc::Status FakeMemd::Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                               v1::ReleaseReply* reply) {
  absl::MutexLock lock(&mu_);
  Session* session = nullptr;
  if (grpc::Status held = HolderLocked(*context, request->lease_id(), &session); !held.ok()) {
    return held;
  }
  leases_.erase(request->lease_id());
  released_.emplace_back(request->lease_id(), session->id);
  return grpc::Status::OK;
}

grpc::Status FakeMemd::Reclaim(grpc::ServerContext* context, const v1::ReclaimRequest* request,
                               v1::ReclaimReply* reply) {
  absl::MutexLock lock(&mu_);
  Session* session = CallerLocked(*context);
  if (session == nullptr) return NoSession();
  reclaims_.push_back(*request);
  if (!reclaim_status_.ok()) return reclaim_status_;
  auto previous = sessions_.find(request->previous_token());
  const bool ended = previous != sessions_.end() && !previous->second.socket;
  for (std::uint64_t id : request->lease_ids()) {
    auto lease = leases_.find(id);
    if (!ended || refused_.contains(id) || lease == leases_.end() ||
        lease->second != request->previous_token()) {
      v1::LeaseRefusal* refusal = reply->add_refused();
      refusal->set_lease_id(id);
      refusal->set_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
      refusal->set_message(absl::StrCat("no lease ", id, " of that session"));
      continue;
    }
    lease->second = session->token;
    reply->add_reclaimed(id);
  }
  return grpc::Status::OK;
}

grpc::Status FakeMemd::Ping(grpc::ServerContext*, const v1::PingRequest* request,
                            v1::PingReply* reply) {
  reply->set_payload(request->payload());
  return grpc::Status::OK;
}

}  // namespace memd::test
