#include "daemon/session/session_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/session_codec.h"
#include "spdlog/spdlog.h"

namespace memd::session {
namespace {

// 128 random bits, hex: what a gRPC call presents to act for a session.
absl::StatusOr<std::string> NewToken() {
  char bytes[16];
  std::size_t filled = 0;
  while (filled < sizeof(bytes)) {
    ssize_t got = ::getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("getrandom", errno);
    }
    filled += static_cast<std::size_t>(got);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

std::string CommandOf(pid_t pid) {
  std::ifstream comm(absl::StrCat("/proc/", pid, "/comm"));
  std::string command;
  std::getline(comm, command);
  return command.empty() ? "?" : command;
}

void SendHello(int fd, const SessionHello& hello) {
  absl::Status sent = SendPacket(fd, EncodeSessionMessage(hello), -1, MSG_DONTWAIT);
  if (!sent.ok()) spdlog::debug("session hello not delivered: {}", sent.ToString());
}

std::string KernelRelease() {
  utsname name{};
  return ::uname(&name) == 0 ? name.release : "unknown";
}

}  // namespace

SessionServer::SessionServer(UniqueFd session_listener, UniqueFd control_listener,
                             SessionHooks hooks, SessionServerOptions options)
    : sessions_listener_(std::move(session_listener), "session socket"),
      hooks_(std::move(hooks)),
      want_refuse_descriptors_(options.refuse_descriptors),
      // Replaced in Start once it is known how sockets may be closed.
      shared_(std::make_shared<SessionShared>(true)),
      connection_limits_(options.connections) {
  if (control_listener) control_listener_.emplace(std::move(control_listener), "control socket");
  shared_->max_fds_in_flight = options.max_fds_in_flight_per_session;
}

SessionServer::~SessionServer() { Stop(); }

absl::Status SessionServer::Start() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return ErrnoStatus("epoll_create1", errno);
  wakeup_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup_) return ErrnoStatus("eventfd", errno);
  std::vector<Listener*> listeners = {&sessions_listener_};
  if (control_listener_) listeners.push_back(&*control_listener_);
  for (Listener* listener : listeners) {
    const int flags = ::fcntl(listener->fd(), F_GETFL);
    if (flags < 0 || ::fcntl(listener->fd(), F_SETFL, flags | O_NONBLOCK) != 0) {
      return ErrnoStatus("fcntl(O_NONBLOCK)", errno);
    }
  }
  refuses_descriptors_ = false;
  if (want_refuse_descriptors_) {
    absl::Status refused = absl::OkStatus();
    for (Listener* listener : listeners) refused.Update(RefuseDescriptors(listener->fd()));
    refuses_descriptors_ = refused.ok();
    if (!refused.ok()) {
      // Without SO_PASSRIGHTS a client can still slip a descriptor into its
      // socket before memd shuts it for reading; such sockets are closed on
      // a thread of their own.
      spdlog::warn("kernel {}: {}; sockets clients may have loaded with "
                   "descriptors are closed on a separate thread",
                   KernelRelease(), std::string(refused.message()));
    }
  }
  const std::uint32_t in_flight = shared_->max_fds_in_flight;
  shared_ = std::make_shared<SessionShared>(refuses_descriptors_);
  shared_->max_fds_in_flight = in_flight;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wakeup_.get();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wakeup_.get(), &event) != 0) {
    return ErrnoStatus("epoll_ctl", errno);
  }
  for (Listener* listener : listeners) {
    event.data.fd = listener->fd();
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener->fd(), &event) != 0) {
      return ErrnoStatus("epoll_ctl", errno);
    }
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void SessionServer::Stop() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    ssize_t written = ::write(wakeup_.get(), &one, sizeof(one));
    (void)written;
    thread_.join();
  }
  for (auto& [fd, session] : by_fd_) {
    {
      absl::MutexLock lock(&mu_);
      by_token_.erase(session->token());
      by_id_.erase(session->id());
    }
    hooks_.end(session->id());
  }
  by_fd_.clear();
}

void SessionServer::Watch(const Listener& listener) {
  epoll_event event{};
  event.events = listener.paused() ? 0u : static_cast<std::uint32_t>(EPOLLIN);
  event.data.fd = listener.fd();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener.fd(), &event);
}

int SessionServer::NextResumeMs(absl::Time now) const {
  absl::Time first = absl::InfiniteFuture();
  if (sessions_listener_.paused()) first = sessions_listener_.paused_until();
  if (control_listener_ && control_listener_->paused()) {
    first = std::min(first, control_listener_->paused_until());
  }
  if (first == absl::InfiniteFuture()) return -1;
  return static_cast<int>(
      std::max<std::int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(first - now, absl::Milliseconds(1)))));
}

void SessionServer::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    int ready = ::epoll_wait(epoll_.get(), events, kMaxEvents, NextResumeMs(absl::Now()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("session server: epoll_wait: {}", std::strerror(errno));
      return;
    }
    const absl::Time now = absl::Now();
    for (Listener* listener : {&sessions_listener_,
                               control_listener_ ? &*control_listener_ : nullptr}) {
      if (listener != nullptr && listener->paused() && listener->paused_until() <= now) {
        listener->Resume();
        Watch(*listener);
      }
    }
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wakeup_.get()) return;
      if (fd == sessions_listener_.fd()) {
        AcceptSessions(now);
      } else if (control_listener_ && fd == control_listener_->fd()) {
        AcceptControl(now);
      } else if ((events[i].events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) != 0) {
        Hangup(fd);
      } else {
        ReadCalls(fd, now);
      }
    }
  }
}

void SessionServer::AcceptSessions(absl::Time now) {
  while (std::optional<UniqueFd> fd = sessions_listener_.Accept(now)) {
    SessionHello hello;
    hello.protocol_version = kSessionProtocolVersion;
    auto peer = GetPeerCredentials(fd->get());
    if (!peer.ok()) {
      refusals_.Warn(now, absl::StrCat("session server: ", peer.status().ToString()));
      shared_->closer.Close(std::move(*fd));
      continue;
    }
    auto token = NewToken();
    absl::StatusOr<std::uint64_t> id =
        token.ok() ? hooks_.start(*peer, CommandOf(peer->pid), *token) : token.status();
    if (!id.ok()) {
      refusals_.Warn(now, absl::StrCat("refused session for pid ", peer->pid, " uid ",
                                       peer->uid, ": ", id.status().ToString()));
      hello.error = std::string(id.status().message());
      hello.error_code = static_cast<int>(id.status().code());
      SendHello(fd->get(), hello);
      shared_->closer.Close(std::move(*fd));
      continue;
    }
    hello.session_id = *id;
    hello.token = *token;
    const int raw = fd->get();
    epoll_event event{};
    // Calls of the fast control path, and hang-ups (EPOLLHUP and EPOLLERR
    // are always reported).
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = raw;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &event) != 0) {
      spdlog::error("session server: epoll_ctl: {}", std::strerror(errno));
      hooks_.end(*id);
      shared_->closer.Close(std::move(*fd));
      continue;
    }
    auto session =
        std::make_shared<Session>(*id, *token, *peer, std::move(*fd), shared_);
    {
      absl::MutexLock lock(&mu_);
      by_token_.emplace(*token, session);
      by_id_.emplace(*id, session);
    }
    by_fd_.emplace(raw, session);
    SendHello(raw, hello);
    spdlog::debug("session {} started: pid {} uid {} gid {}", *id, peer->pid,
                  peer->uid, peer->gid);
  }
  if (sessions_listener_.paused()) Watch(sessions_listener_);
}

void SessionServer::AcceptControl(absl::Time now) {
  while (std::optional<UniqueFd> fd = control_listener_->Accept(now)) {
    auto peer = GetPeerCredentials(fd->get());
    absl::Status admitted = peer.status();
    if (peer.ok()) {
      ConnectionLimits limits;
      {
        absl::MutexLock lock(&mu_);
        limits = connection_limits_;
      }
      admitted = connections_.Admit(fd->get(), *peer, limits);
    }
    if (!admitted.ok()) {
      refusals_.Warn(now, absl::StrCat("control socket: refused a connection: ",
                                       admitted.message()));
      shared_->closer.Close(std::move(*fd));
      continue;
    }
    hooks_.control(std::move(*fd));
  }
  if (control_listener_->paused()) Watch(*control_listener_);
}

void SessionServer::Hangup(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  std::shared_ptr<Session> session = std::move(it->second);
  by_fd_.erase(it);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  {
    absl::MutexLock lock(&mu_);
    by_token_.erase(session->token());
    by_id_.erase(session->id());
  }
  spdlog::debug("session {} ended (pid {})", session->id(), session->peer().pid);
  hooks_.end(session->id());
}

void SessionServer::ReadCalls(int fd, absl::Time now) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  const std::shared_ptr<Session> session = it->second;
  auto packets = ReceiveWaitingPackets(fd, calls_read_, kMaxCallBytes);
  if (!packets.ok()) {
    // ECONNRESET: the client went with answers unread (as one read did).
    if (absl::IsUnavailable(packets.status())) Hangup(fd);
    return;
  }
  for (absl::StatusOr<ReceivedPacket>& packet : *packets) {
    if (!packet.ok()) {
      // The end of the stream comes last; a malformed packet is dropped.
      if (!absl::IsUnavailable(packet.status())) continue;
      Hangup(fd);
      return;
    }
    if (packet->fd) {
      // Refused by the listener where the kernel can (SO_PASSRIGHTS); a
      // descriptor that came anyway is closed off this thread, since its
      // close may block.
      shared_->closer.Close(std::move(packet->fd));
      refusals_.Warn(now, absl::StrCat("session ", session->id(), " (pid ", session->peer().pid,
                                       ") sent a descriptor: dropped"));
      continue;
    }
    absl::StatusOr<SessionMessage> message = DecodeSessionMessage(packet->bytes);
    const SessionCall* call = message.ok() ? std::get_if<SessionCall>(&*message) : nullptr;
    if (call == nullptr || !hooks_.call) {
      refusals_.Warn(now, absl::StrCat("session ", session->id(), " (pid ", session->peer().pid,
                                       ") sent a packet that is no call: dropped"));
      continue;
    }
    hooks_.call(*session, *call);
  }
}

std::shared_ptr<Session> SessionServer::Find(absl::string_view token) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_token_.find(token);
  return it == by_token_.end() ? nullptr : it->second;
}

std::shared_ptr<Session> SessionServer::FindById(std::uint64_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::optional<PeerCredentials> SessionServer::ControlPeer(int fd) const {
  return connections_.PeerOf(fd);
}

void SessionServer::SetLimits(std::uint32_t max_fds_in_flight_per_session,
                              const ConnectionLimits& connections) {
  shared_->max_fds_in_flight = max_fds_in_flight_per_session;
  absl::MutexLock lock(&mu_);
  connection_limits_ = connections;
}

std::size_t SessionServer::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return by_token_.size();
}

}  // namespace memd::session
