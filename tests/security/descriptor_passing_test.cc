// Finding 2 (issue 9): memd read descriptors that clients sent on the
// session socket and closed them on its single epoll thread. A client that
// sent a Unix socket holding a TCP socket that lingers on unsent data made
// that close block for as long as it liked: no new sessions, no hang-ups
// processed, `memctl ping` timing out. Now neither socket accepts a
// descriptor, and the session thread never reads a client's socket.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/paths.h"
#include "common/unix_socket.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
#include "tests/support/hostile.h"

namespace memd {
namespace {

using test::ForkAs;
using test::kMallory;
using test::WriteAll;

// A loopback TCP listener that never accepts nor reads, with a small
// receive buffer: whoever connects soon has unsent data. It must stay open
// (here: in the test process) for a connection to it to linger.
UniqueFd SilentListener(sockaddr_in& address) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  address = sockaddr_in{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const int small = 4096;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return UniqueFd();
  }
  return listener;
}

// A TCP socket whose last close blocks for `seconds`: connected to a
// silent listener, with SO_LINGER set and unsent data queued behind a
// closed window. Returns -1 on failure.
int LingeringTcpSocket(const sockaddr_in& silent, int seconds) {
  int tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int small = 4096;
  ::setsockopt(tcp, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  if (::connect(tcp, reinterpret_cast<const sockaddr*>(&silent), sizeof(silent)) != 0 &&
      errno != EINPROGRESS) {
    return -1;
  }
  // Let the handshake finish (the accept queue takes it): writable once
  // connected.
  pollfd connected{tcp, POLLOUT, 0};
  ::poll(&connected, 1, 10000);
  const linger stay{1, seconds};
  ::setsockopt(tcp, SOL_SOCKET, SO_LINGER, &stay, sizeof(stay));
  char junk[4096] = {};
  while (::send(tcp, junk, sizeof(junk), MSG_NOSIGNAL) > 0) {
  }
  return tcp;
}

// Sends one byte with `fd` attached; returns 0 or the errno.
int SendDescriptor(int socket, int fd) {
  absl::Status sent = SendPacket(socket, "x", fd, MSG_DONTWAIT);
  if (sent.ok()) return 0;
  return sent.message().find("Operation not permitted") != std::string::npos ? EPERM
         : sent.message().find("Broken pipe") != std::string::npos          ? EPIPE
                                                                             : EIO;
}

class DescriptorPassingTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override {
    StartDaemon();
  }
};

TEST_F(DescriptorPassingTest, NeitherSocketAcceptsADescriptorFromAClient) {
  test::ChildResult attack = ForkAs(kMallory, kMallory, [&](int out) {
    std::string report;
    for (const auto& [path, type] :
         {std::pair{SessionSocketPath(config_.socket_dir), SOCK_SEQPACKET},
          std::pair{ControlSocketPath(config_.socket_dir), SOCK_STREAM}}) {
      auto socket = ConnectUnix(path, type);
      if (!socket.ok()) return 10;
      absl::StrAppend(&report, SendDescriptor(socket->get(), 1), " ");
    }
    // A packet that is no call is read and dropped (the session socket takes
    // the fast control path's calls): the session goes on.
    auto session = ConnectUnix(SessionSocketPath(config_.socket_dir), SOCK_SEQPACKET);
    if (!session.ok()) return 11;
    pollfd greeted{session->get(), POLLIN, 0};
    if (::poll(&greeted, 1, 10000) != 1) return 12;
    absl::StrAppend(&report, SendDescriptor(session->get(), -1));
    pollfd hung_up{session->get(), POLLRDHUP, 0};
    absl::StrAppend(&report, " ", ::poll(&hung_up, 1, 200));
    WriteAll(out, report);
    return 0;
  });
  ASSERT_EQ(attack.exit_code, 0) << attack.out;
  // EPERM: the kernel refuses descriptors (SO_PASSRIGHTS); EPIPE: memd shut
  // the connection. Either way no descriptor reached memd.
  std::vector<std::string> results = absl::StrSplit(attack.out, ' ');
  ASSERT_EQ(results.size(), 4u) << attack.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(results[i] == absl::StrCat(EPERM) || results[i] == absl::StrCat(EPIPE))
        << "descriptor send " << i << ": " << attack.out;
  }
  EXPECT_EQ(results[2], "0") << "a plain packet is taken: " << attack.out;
  EXPECT_EQ(results[3], "0") << "and the session stays up: " << attack.out;
}

TEST_F(DescriptorPassingTest, ALingeringSocketCannotFreezeTheSessionThread) {
  sockaddr_in silent;
  UniqueFd listener = SilentListener(silent);
  ASSERT_TRUE(listener.valid());
  test::ChildResult attack = ForkAs(kMallory, kMallory, [&](int out) {
    int tcp = LingeringTcpSocket(silent, /*seconds=*/120);
    if (tcp < 0) return 10;
    // Hide the TCP socket inside a Unix socket's queue, keep no other
    // reference to either, and hand that socket to memd.
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) return 11;
    if (!SendPacket(pair[0], "t", tcp, 0).ok()) return 12;
    ::close(tcp);
    ::close(pair[0]);
    auto session = ConnectUnix(SessionSocketPath(config_.socket_dir), SOCK_SEQPACKET);
    if (!session.ok()) return 13;
    // Whoever closes the last copy of the loaded socket waits out the
    // linger, unless it is exiting. Drop the attacker's copy at once, while
    // memd's is still on its way (memd then holds the last one); when memd
    // refused it, exiting drops it without a wait.
    const int refused = SendDescriptor(session->get(), pair[1]);
    if (refused == 0) ::close(pair[1]);
    WriteAll(out, absl::StrCat(refused));
    return 0;  // Exiting hangs up: memd ends the session.
  });
  ASSERT_EQ(attack.exit_code, 0) << attack.out;

  // Another client is greeted, and served, at once. Before the fix the
  // session thread sat in close() for the two minutes the socket lingers.
  auto client = Client::Connect({.socket_dir = config_.socket_dir,
                                 .call_timeout = absl::Seconds(10)});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Ping().ok());
  auto buffer = (*client)->Create("after/attack", 4096);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
}

}  // namespace
}  // namespace memd
