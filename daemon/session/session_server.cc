#include "daemon/session/session_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "memd/v1/memd.pb.h"
#include "spdlog/spdlog.h"

namespace memd::session {
namespace {

constexpr std::uint32_t kProtocolVersion = 1;

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

void SendHello(int fd, const v1::SessionHello& hello) {
  v1::SessionMessage message;
  *message.mutable_hello() = hello;
  absl::Status sent =
      SendPacket(fd, message.SerializeAsString(), -1, MSG_DONTWAIT);
  if (!sent.ok()) spdlog::debug("session hello not delivered: {}", sent.ToString());
}

}  // namespace

SessionServer::SessionServer(UniqueFd listener, SessionHooks hooks)
    : listener_(std::move(listener)), hooks_(std::move(hooks)) {}

SessionServer::~SessionServer() { Stop(); }

absl::Status SessionServer::Start() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return ErrnoStatus("epoll_create1", errno);
  wakeup_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup_) return ErrnoStatus("eventfd", errno);
  int flags = ::fcntl(listener_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listener_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus("fcntl(O_NONBLOCK)", errno);
  }
  for (int fd : {listener_.get(), wakeup_.get()}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
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
  listener_.reset();
  for (auto& [fd, session] : by_fd_) {
    {
      absl::MutexLock lock(&mu_);
      by_token_.erase(session->token());
    }
    hooks_.end(session->id());
  }
  by_fd_.clear();
}

void SessionServer::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    int ready = ::epoll_wait(epoll_.get(), events, kMaxEvents, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("session server: epoll_wait: {}", std::strerror(errno));
      return;
    }
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wakeup_.get()) return;
      if (fd == listener_.get()) {
        Accept();
      } else if (events[i].events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
        Hangup(fd);
      } else {
        Drain(fd);
      }
    }
  }
}

void SessionServer::Accept() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr,
                          SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN) {
        spdlog::warn("session server: accept: {}", std::strerror(errno));
      }
      return;
    }
    v1::SessionHello hello;
    hello.set_protocol_version(kProtocolVersion);
    auto peer = GetPeerCredentials(fd.get());
    if (!peer.ok()) {
      spdlog::warn("session server: {}", peer.status().ToString());
      continue;
    }
    auto token = NewToken();
    absl::StatusOr<std::uint64_t> id =
        token.ok() ? hooks_.start(*peer, CommandOf(peer->pid)) : token.status();
    if (!id.ok()) {
      spdlog::warn("refused session for pid {} uid {}: {}", peer->pid,
                   peer->uid, id.status().ToString());
      hello.set_error(std::string(id.status().message()));
      hello.set_error_code(static_cast<int>(id.status().code()));
      SendHello(fd.get(), hello);
      continue;
    }
    hello.set_session_id(*id);
    hello.set_token(*token);
    const int raw = fd.get();
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = raw;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &event) != 0) {
      spdlog::error("session server: epoll_ctl: {}", std::strerror(errno));
      hooks_.end(*id);
      continue;
    }
    auto session = std::make_shared<Session>(*id, *token, *peer, std::move(fd));
    {
      absl::MutexLock lock(&mu_);
      by_token_.emplace(*token, session);
    }
    by_fd_.emplace(raw, session);
    SendHello(raw, hello);
    spdlog::debug("session {} started: pid {} uid {} gid {}", *id, peer->pid,
                  peer->uid, peer->gid);
  }
}

void SessionServer::Drain(int fd) {
  // Clients have nothing to say on this socket yet; whatever they send is
  // read and dropped so that it cannot fill the buffer. EOF is a hang-up.
  for (;;) {
    auto packet = ReceivePacket(fd, 512, MSG_DONTWAIT);
    if (!packet.ok()) {
      Hangup(fd);
      return;
    }
    if (!packet->has_value()) return;
  }
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
  }
  spdlog::debug("session {} ended (pid {})", session->id(), session->peer().pid);
  hooks_.end(session->id());
}

std::shared_ptr<Session> SessionServer::Find(absl::string_view token) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_token_.find(token);
  return it == by_token_.end() ? nullptr : it->second;
}

std::size_t SessionServer::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return by_token_.size();
}

}  // namespace memd::session
