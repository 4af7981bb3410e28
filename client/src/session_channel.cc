#include "client/src/session_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/paths.h"
#include "common/unix_socket.h"
#include "memd/v1/memd.pb.h"

namespace memd::internal {
namespace {

constexpr std::size_t kMaxPacket = 4096;
constexpr std::size_t kMaxWaitingFds = 256;

// Waits until the socket is readable. Errors: DEADLINE_EXCEEDED, or the
// errno mapping of poll.
absl::Status WaitReadable(int fd, absl::Time deadline) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          "the daemon sent no descriptor in time on the session socket");
    }
    pollfd poll_fd{fd, POLLIN, 0};
    int ready = ::poll(&poll_fd, 1,
                       static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
  }
}

// Reads one packet, waiting until `deadline`.
absl::StatusOr<ReceivedPacket> Receive(int fd, absl::Time deadline) {
  for (;;) {
    auto packet = ReceivePacket(fd, kMaxPacket, MSG_DONTWAIT);
    if (!packet.ok()) return packet.status();
    if (packet->has_value()) return std::move(**packet);
    if (auto ready = WaitReadable(fd, deadline); !ready.ok()) return ready;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionChannel>> SessionChannel::Connect(
    const std::string& socket_dir, absl::Duration timeout) {
  auto socket = ConnectUnix(SessionSocketPath(socket_dir), SOCK_SEQPACKET);
  if (!socket.ok()) return socket.status();
  auto packet = Receive(socket->get(), absl::Now() + timeout);
  if (!packet.ok()) {
    return absl::Status(packet.status().code(),
                        absl::StrCat("memd at ", socket_dir,
                                     " did not greet: ", packet.status().message()));
  }
  v1::SessionMessage message;
  if (!message.ParseFromString(packet->bytes) || !message.has_hello()) {
    return absl::DataLossError(
        absl::StrCat("memd at ", socket_dir, " sent a greeting this client cannot read"));
  }
  const v1::SessionHello& hello = message.hello();
  if (!hello.error().empty()) {
    auto code = static_cast<absl::StatusCode>(hello.error_code());
    if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnavailable;
    return absl::Status(code, absl::StrCat("memd refused the session: ", hello.error()));
  }
  return std::unique_ptr<SessionChannel>(
      new SessionChannel(std::move(*socket), hello.session_id(), hello.token()));
}

absl::StatusOr<UniqueFd> SessionChannel::TakeFd(std::uint64_t seq,
                                                absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto found = waiting_.find(seq);
    if (found != waiting_.end()) {
      UniqueFd fd = std::move(found->second);
      waiting_.erase(found);
      return fd;
    }
    auto packet = Receive(socket_.get(), deadline);
    if (!packet.ok()) return packet.status();
    v1::SessionMessage message;
    if (!message.ParseFromString(packet->bytes) || !message.has_fd() ||
        !packet->fd) {
      return absl::DataLossError("unexpected packet on the session socket");
    }
    if (message.fd().seq() == seq) return std::move(packet->fd);
    waiting_[message.fd().seq()] = std::move(packet->fd);
    if (waiting_.size() > kMaxWaitingFds) waiting_.erase(waiting_.begin());
  }
}

bool SessionChannel::HungUp() const {
  pollfd poll_fd{socket_.get(), POLLRDHUP, 0};
  return ::poll(&poll_fd, 1, 0) > 0 &&
         (poll_fd.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

}  // namespace memd::internal
