#include "client/src/session_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/errno_status.h"
#include "common/paths.h"
#include "common/session_codec.h"
#include "common/status_macros.h"
#include "common/unix_socket.h"

namespace memd::internal {
namespace {

constexpr std::size_t kMaxPacket = 4096;
constexpr std::size_t kMaxWaitingFds = 256;
constexpr std::size_t kMaxFreed = 4096;

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

// The session socket's receive timeout (SO_RCVTIMEO, set at connect): a
// read that blocks wakes at least this often to look at its deadline.
constexpr absl::Duration kReadTick = absl::Milliseconds(50);

absl::Status SetReadTick(int fd) {
  const timeval tick{0, static_cast<suseconds_t>(absl::ToInt64Microseconds(kReadTick))};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick)) != 0) {
    return ErrnoStatus("setsockopt SO_RCVTIMEO on the session socket", errno);
  }
  return absl::OkStatus();
}

// Reads one packet, waiting until `deadline`. A read that blocks (woken by
// the packet, or after kReadTick) is one system call where a poll and then
// a read were two: an answer to a call comes in microseconds (issue 28,
// target 4). Within kReadTick of the deadline it waits by poll, which ends
// on time.
absl::StatusOr<ReceivedPacket> Receive(int fd, absl::Time deadline) {
  for (;;) {
    const bool block = deadline - absl::Now() > kReadTick;
    if (!block) {
      if (auto ready = WaitReadable(fd, deadline); !ready.ok()) return ready;
    }
    auto packet = ReceivePacket(fd, kMaxPacket, block ? 0 : MSG_DONTWAIT);
    if (!packet.ok()) return packet.status();
    if (packet->has_value()) return std::move(**packet);
  }
}

// MEMD_FAST_CONTROL_PATH=0 sends every call over gRPC (to compare the
// paths, and to run the tests over both).
bool FastPathWanted() {
  const char* value = std::getenv("MEMD_FAST_CONTROL_PATH");
  return value == nullptr || std::string_view(value) != "0";
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionChannel>> SessionChannel::Connect(
    const std::string& socket_dir, absl::Duration timeout,
    const DaemonTrust& trust) {
  // The directory is checked once, as a descriptor; the socket is then
  // reached through that descriptor, so that swapping the directory after
  // the check changes nothing.
  UniqueFd dir(::open(socket_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return NoListenerError(SessionSocketPath(socket_dir), error);
    }
    return ErrnoStatus(absl::StrCat("open socket directory ", socket_dir), error);
  }
  const std::string through = absl::StrCat("/proc/self/fd/", dir.get());
  std::string directory = socket_dir;
  char resolved[4096];
  const ssize_t length = ::readlink(through.c_str(), resolved, sizeof(resolved));
  const bool have_proc = length > 0 && length < static_cast<ssize_t>(sizeof(resolved));
  if (have_proc) directory.assign(resolved, static_cast<std::size_t>(length));
  auto chain = DescribeDirChain(dir.get(), directory);
  if (!chain.ok()) return chain.status();
  auto owner = CheckSocketDirChain(*chain, trust);
  if (!owner.ok()) return owner.status();

  auto socket = ConnectUnix(have_proc ? SessionSocketPath(through)
                                      : SessionSocketPath(directory),
                            SOCK_SEQPACKET);
  if (!socket.ok()) {
    absl::Status named(socket.status().code(),
                       absl::StrReplaceAll(socket.status().message(), {{through, socket_dir}}));
    socket.status().ForEachPayload(
        [&](absl::string_view url, const absl::Cord& payload) { named.SetPayload(url, payload); });
    return named;
  }
  MEMD_RETURN_IF_ERROR(SetReadTick(socket->get()));
  auto peer = GetPeerCredentials(socket->get());
  if (!peer.ok()) return peer.status();
  if (auto trusted = CheckDaemonPeer(socket_dir, *owner, peer->uid, trust);
      !trusted.ok()) {
    return trusted;
  }
  auto packet = Receive(socket->get(), absl::Now() + timeout);
  if (!packet.ok()) {
    return absl::Status(packet.status().code(),
                        absl::StrCat("memd at ", socket_dir,
                                     " did not greet: ", packet.status().message()));
  }
  absl::StatusOr<SessionMessage> message = DecodeSessionMessage(packet->bytes);
  const SessionHello* hello =
      message.ok() ? std::get_if<SessionHello>(&*message) : nullptr;
  if (hello == nullptr) {
    return absl::DataLossError(
        absl::StrCat("memd at ", socket_dir, " sent a greeting this client cannot read"));
  }
  if (!hello->error.empty()) {
    auto code = static_cast<absl::StatusCode>(hello->error_code);
    if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnavailable;
    return absl::Status(code, absl::StrCat("memd refused the session: ", hello->error));
  }
  return std::unique_ptr<SessionChannel>(new SessionChannel(
      std::move(*socket), hello->session_id, hello->token, std::move(directory),
      hello->protocol_version >= kFirstVersionWithCalls && FastPathWanted()));
}

absl::StatusOr<SessionChannel::First> SessionChannel::ConnectFirst(
    const std::vector<std::string>& socket_dirs, absl::Duration timeout,
    const DaemonTrust& trust) {
  std::vector<std::string> tried;
  for (const std::string& dir : socket_dirs) {
    auto channel = Connect(dir, timeout, trust);
    if (channel.ok()) return First{std::move(*channel), dir};
    std::optional<std::string> absent = IsNoListener(channel.status());
    if (!absent.has_value() || socket_dirs.size() == 1) return channel.status();
    tried.push_back(absl::StrCat(dir, " (", *absent, ")"));
  }
  return absl::UnavailableError(absl::StrCat(
      "no memd listens in any socket directory tried: ", absl::StrJoin(tried, ", "),
      ". Start memd (a system service listens in ", kSystemSocketDir,
      "; memd run by hand, in the first), or set MEMD_SOCKET_DIR (memctl "
      "--socket-dir) to the directory it listens in"));
}

template <typename Value>
absl::StatusOr<Value> SessionChannel::AwaitLocked(std::map<std::uint64_t, Value>& slots,
                                                  std::uint64_t key, absl::Time deadline) {
  for (;;) {
    auto found = slots.find(key);
    if (found != slots.end()) {
      Value value = std::move(found->second);
      slots.erase(found);
      return value;
    }
    auto packet = Receive(socket_.get(), deadline);
    if (!packet.ok()) return packet.status();
    if constexpr (std::is_same_v<Value, Answer>) {
      // The usual case: the packet is the answer awaited, taken unfiled.
      std::optional<Answer> taken;
      MEMD_RETURN_IF_ERROR(FileLocked(*std::move(packet), key, &taken));
      if (taken.has_value()) return std::move(*taken);
    } else {
      MEMD_RETURN_IF_ERROR(FileLocked(*std::move(packet)));
    }
  }
}

absl::StatusOr<UniqueFd> SessionChannel::TakeFd(std::uint64_t seq,
                                                absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  PlainMutexLock lock(&mu_);
  return AwaitLocked(waiting_, seq, deadline);
}

absl::Status SessionChannel::DrainIfIdle() {
  // A caller holding mu_ reads the socket itself (and files what it finds).
  if (!mu_.TryLock()) return absl::OkStatus();
  absl::Status status;
  for (;;) {
    auto packet = ReceivePacket(socket_.get(), kMaxPacket, MSG_DONTWAIT);
    if (!packet.ok()) {
      status = packet.status();
      break;
    }
    if (!packet->has_value()) break;
    // A packet memd would not send is dropped: reading on is what keeps
    // the socket from filling.
    (void)FileLocked(**std::move(packet));
  }
  mu_.Unlock();
  return status;
}

absl::Status SessionChannel::FileLocked(ReceivedPacket packet, std::uint64_t awaited,
                                        std::optional<Answer>* taken) {
  absl::StatusOr<SessionMessage> message = DecodeSessionMessage(packet.bytes);
  if (message.ok()) {
    if (const auto* freed = std::get_if<SessionFreed>(&*message);
        freed != nullptr && !packet.fd) {
      PlainMutexLock freed_lock(&freed_mu_);
      freed_.insert(freed_.end(), freed->buffer_ids.begin(), freed->buffer_ids.end());
      // Unclaimed for long (nobody keeps imports): the oldest go.
      if (freed_.size() > kMaxFreed) freed_.erase(freed_.begin(), freed_.end() - kMaxFreed);
      return absl::OkStatus();
    }
    if (auto* answer = std::get_if<SessionAnswer>(&*message)) {
      if (awaited != 0 && answer->call_id == awaited) {
        *taken = Answer{std::move(*answer), std::move(packet.fd)};
        return absl::OkStatus();
      }
      answers_[answer->call_id] = Answer{std::move(*answer), std::move(packet.fd)};
      if (answers_.size() > kMaxWaitingFds) answers_.erase(answers_.begin());
      return absl::OkStatus();
    }
    if (const auto* sent = std::get_if<SessionFd>(&*message); sent != nullptr && packet.fd) {
      waiting_[sent->seq] = std::move(packet.fd);
      if (waiting_.size() > kMaxWaitingFds) waiting_.erase(waiting_.begin());
      return absl::OkStatus();
    }
  }
  return absl::DataLossError("unexpected packet on the session socket");
}

absl::Status SessionChannel::SendCall(const SessionCall& call) {
  absl::Status sent =
      SendPacket(socket_.get(), EncodeSessionMessage(call), -1, MSG_DONTWAIT);
  if (!sent.ok()) {
    return absl::UnavailableError(absl::StrCat("the session socket took no call: ",
                                               sent.message()));
  }
  return sent;
}

absl::StatusOr<SessionChannel::Answer> SessionChannel::Call(SessionCallKind kind,
                                                            std::string request,
                                                            absl::Duration timeout,
                                                            bool* unsent) {
  const std::uint64_t call_id = next_call_id_.fetch_add(1);
  // memd takes a socket's calls in order: once this one is answered, so
  // were the Releases sent before it.
  const std::uint64_t covers = releases_sent_.load();
  if (absl::Status sent = SendCall(SessionCall{call_id, kind, std::move(request)}); !sent.ok()) {
    if (unsent != nullptr) *unsent = true;
    return sent;
  }
  const absl::Time deadline = absl::Now() + timeout;
  PlainMutexLock lock(&mu_);
  absl::StatusOr<Answer> answer = AwaitLocked(answers_, call_id, deadline);
  if (answer.ok()) {
    std::uint64_t settled = releases_settled_.load();
    while (settled < covers && !releases_settled_.compare_exchange_weak(settled, covers)) {
    }
  }
  return answer;
}

absl::Status SessionChannel::SendRelease(std::string request) {
  // Counted first, so that a call sent after it covers it. One that fails
  // to go stays counted: it costs one needless Barrier at most.
  releases_sent_.fetch_add(1);
  return SendCall(SessionCall{0, SessionCallKind::kRelease, std::move(request)});
}

absl::Status SessionChannel::SettleReleases(absl::Duration timeout) {
  if (releases_settled_.load() >= releases_sent_.load()) return absl::OkStatus();
  return Call(SessionCallKind::kBarrier, {}, timeout).status();
}

std::vector<std::uint64_t> SessionChannel::TakeFreed() {
  // Not mu_: a call may hold that while it waits for its answer, and an
  // open asks for the notices before it sends its own call.
  PlainMutexLock lock(&freed_mu_);
  return std::exchange(freed_, {});
}

namespace {

constexpr short kHangUpEvents = POLLHUP | POLLRDHUP | POLLERR;

}  // namespace

bool SessionChannel::HungUp() const {
  pollfd poll_fd{socket_.get(), POLLRDHUP, 0};
  return ::poll(&poll_fd, 1, 0) > 0 && (poll_fd.revents & kHangUpEvents) != 0;
}

absl::StatusOr<SessionChannel::Event> SessionChannel::Wait(int wake_fd,
                                                           absl::Duration timeout) const {
  const int millis = timeout == absl::InfiniteDuration()
                         ? -1
                         : static_cast<int>(absl::ToInt64Milliseconds(timeout));
  for (;;) {
    // POLLIN is not asked of the socket: every answer to a call would wake
    // this wait, and cost the caller a thread switch.
    pollfd poll_fds[2] = {{socket_.get(), POLLRDHUP, 0}, {wake_fd, POLLIN, 0}};
    const int ready = ::poll(poll_fds, 2, millis);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("poll", errno);
    }
    if (ready == 0) return Event::kTimedOut;
    if ((poll_fds[0].revents & kHangUpEvents) != 0) return Event::kHungUp;
    if (poll_fds[1].revents != 0) return Event::kWoken;
  }
}

}  // namespace memd::internal
