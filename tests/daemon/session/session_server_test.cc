// The session server alone, on sockets of the test's own: greetings,
// hang-ups, descriptor bounds and the fallback for kernels that cannot
// refuse descriptors.

#include "daemon/session/session_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <variant>

#include "absl/synchronization/notification.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"
#include "gtest/gtest.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"

namespace memd::session {
namespace {

class SessionServerTest : public ::testing::Test {
 protected:
  // A server on a fresh session socket; `refuse` as SessionServerOptions.
  std::unique_ptr<SessionServer> MakeServer(bool refuse, std::uint32_t in_flight = 32) {
    auto listener = ListenUnix(path_, SOCK_SEQPACKET, 0600);
    EXPECT_TRUE(listener.ok()) << listener.status();
    SessionHooks hooks{
        [this](const PeerCredentials&, const std::string&,
               const std::string&) -> absl::StatusOr<std::uint64_t> {
          return ++started_;
        },
        [this](std::uint64_t) {
          if (++ended_ == 1) first_end_.Notify();
        },
        [](UniqueFd) {},
        [this](Session& session, const SessionCall& call) {
          calls_.fetch_add(1);
          SessionAnswer answer{call.call_id, 0, "", absl::StrCat("echo ", call.request)};
          (void)session.SendAnswer(answer, -1);
        }};
    SessionServerOptions options;
    options.refuse_descriptors = refuse;
    options.max_fds_in_flight_per_session = in_flight;
    return std::make_unique<SessionServer>(std::move(*listener), UniqueFd(),
                                           std::move(hooks), options);
  }

  // Connects and reads the greeting, waiting at most `timeout`.
  absl::StatusOr<std::pair<UniqueFd, SessionHello>> Greeted(
      absl::Duration timeout = absl::Seconds(10)) {
    auto socket = ConnectUnix(path_, SOCK_SEQPACKET);
    if (!socket.ok()) return socket.status();
    pollfd readable{socket->get(), POLLIN, 0};
    if (::poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
      return absl::DeadlineExceededError("no greeting");
    }
    auto packet = ReceivePacket(socket->get(), 4096);
    if (!packet.ok()) return packet.status();
    if (!packet->has_value()) return absl::DataLossError("no greeting");
    auto message = DecodeSessionMessage((*packet)->bytes);
    if (!message.ok()) return message.status();
    const auto* hello = std::get_if<SessionHello>(&*message);
    if (hello == nullptr) return absl::DataLossError("not a greeting");
    return std::make_pair(std::move(*socket), *hello);
  }

  test::TempDir dir_;
  const std::string path_ = dir_.Join("session.sock");
  std::atomic<std::uint64_t> started_{0};
  std::atomic<std::uint64_t> ended_{0};
  std::atomic<std::uint64_t> calls_{0};
  absl::Notification first_end_;
};

TEST_F(SessionServerTest, WithoutPassRightsALoadedSocketIsClosedOffTheEventThread) {
  // As on a kernel before 6.16: a client can slip a descriptor into its
  // socket before memd accepts it and reads its packets. Load it with a
  // TCP socket whose last close lingers for a minute.
  UniqueFd silent(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const int small = 4096;
  ::setsockopt(silent.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  ASSERT_EQ(::bind(silent.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::listen(silent.get(), 1), 0);
  ASSERT_EQ(::getsockname(silent.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  ::setsockopt(tcp.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  ::connect(tcp.get(), reinterpret_cast<sockaddr*>(&address), length);
  pollfd connected{tcp.get(), POLLOUT, 0};  // Writable once the handshake is done.
  ASSERT_EQ(::poll(&connected, 1, 10000), 1);
  const linger stay{1, 60};
  ::setsockopt(tcp.get(), SOL_SOCKET, SO_LINGER, &stay, sizeof(stay));
  char junk[4096] = {};
  while (::send(tcp.get(), junk, sizeof(junk), MSG_NOSIGNAL) > 0) {
  }

  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/false);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd loaded(pair[1]);
  ASSERT_TRUE(SendPacket(pair[0], "t", tcp.get(), 0).ok());
  ::close(pair[0]);
  tcp.reset();
  // Not accepted yet (the server has not started): the send lands.
  auto attacker = ConnectUnix(path_, SOCK_SEQPACKET);
  ASSERT_TRUE(attacker.ok());
  ASSERT_TRUE(SendPacket(attacker->get(), "x", loaded.get(), 0).ok());
  loaded.reset();  // memd's queued copy is the last one now.

  ASSERT_TRUE(server->Start().ok());
  EXPECT_FALSE(server->refuses_descriptors());
  // The attacker's session starts, and ends when it hangs up; the socket
  // memd then closes (and with it the lingering one) goes to the closer.
  auto first = Greeted();
  ASSERT_TRUE(first.ok()) << first.status();
  attacker->reset();
  // The event thread saw the hang-up and let go of the socket; it is free
  // again at once: a newcomer is greeted (an inline close would hold it for
  // the minute the TCP socket lingers).
  ASSERT_TRUE(first_end_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  auto next = Greeted();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GT(next->second.session_id, 0u);
  // The silent listener closing resets the lingering socket, so that the
  // closer's thread finishes.
  silent.reset();
  server->Stop();
}

TEST_F(SessionServerTest, ASessionMayLeaveOnlyItsBoundOfDescriptorsUnread) {
  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/true, /*in_flight=*/4);
  ASSERT_TRUE(server->Start().ok());
  auto client = Greeted();
  ASSERT_TRUE(client.ok()) << client.status();
  std::shared_ptr<Session> session = server->Find(client->second.token);
  ASSERT_NE(session, nullptr);
  for (int i = 0; i < 4; ++i) {
    auto sent = session->SendFd(1);
    ASSERT_TRUE(sent.ok()) << i << ": " << sent.status();
  }
  auto refused = session->SendFd(1);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("4 packets (descriptors, notices) it has not read"),
            std::string::npos)
      << refused.status();
  // Once the client reads them, sends go through again.
  for (int i = 0; i < 4; ++i) {
    auto packet = ReceivePacket(client->first.get(), 4096, MSG_DONTWAIT);
    ASSERT_TRUE(packet.ok() && packet->has_value());
  }
  EXPECT_TRUE(session->SendFd(1).ok());
}

// memd asks the kernel for the session's unread packets only when the last
// count plus the packets sent since could reach the bound; the bound must
// still hold exactly: with the greeting left unread (sent before the
// session existed), and after the client read only some of the packets.
TEST_F(SessionServerTest, TheBoundCountsTheUnreadGreetingAndPartialReads) {
  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/true, /*in_flight=*/4);
  ASSERT_TRUE(server->Start().ok());
  auto socket = ConnectUnix(path_, SOCK_SEQPACKET);
  ASSERT_TRUE(socket.ok()) << socket.status();
  pollfd readable{socket->get(), POLLIN, 0};
  ASSERT_EQ(::poll(&readable, 1, 10000), 1);
  char peeked[4096];
  const ssize_t got = ::recv(socket->get(), peeked, sizeof(peeked), MSG_PEEK);
  ASSERT_GT(got, 0);
  auto message = DecodeSessionMessage(absl::string_view(peeked, static_cast<std::size_t>(got)));
  ASSERT_TRUE(message.ok() && std::holds_alternative<SessionHello>(*message));
  std::shared_ptr<Session> session = server->Find(std::get<SessionHello>(*message).token);
  ASSERT_NE(session, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto sent = session->SendFd(1);
    ASSERT_TRUE(sent.ok()) << i << ": " << sent.status();
  }
  auto refused = session->SendFd(1);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("4 packets"), std::string::npos) << refused.status();
  // Two read (the greeting and one descriptor): two more go, the third not.
  for (int i = 0; i < 2; ++i) {
    auto packet = ReceivePacket(socket->get(), 4096, MSG_DONTWAIT);
    ASSERT_TRUE(packet.ok() && packet->has_value());
  }
  EXPECT_TRUE(session->SendFd(1).ok());
  EXPECT_TRUE(session->SendFd(1).ok());
  refused = session->SendFd(1);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
}

// The answer to call `call_id` on `socket`, waiting at most a few seconds.
absl::StatusOr<SessionAnswer> AnswerOf(int socket, std::uint64_t call_id) {
  for (;;) {
    pollfd readable{socket, POLLIN, 0};
    if (::poll(&readable, 1, 10000) != 1) return absl::DeadlineExceededError("no answer");
    auto packet = ReceivePacket(socket, 4096, MSG_DONTWAIT);
    if (!packet.ok()) return packet.status();
    if (!packet->has_value()) continue;
    auto message = DecodeSessionMessage((*packet)->bytes);
    if (!message.ok()) return message.status();
    const auto* answer = std::get_if<SessionAnswer>(&*message);
    if (answer != nullptr && answer->call_id == call_id) return *answer;
  }
}

TEST_F(SessionServerTest, CallsAreAnsweredAndAnythingElseIsDropped) {
  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/true);
  ASSERT_TRUE(server->Start().ok());
  auto client = Greeted();
  ASSERT_TRUE(client.ok()) << client.status();
  const int socket = client->first.get();
  ASSERT_TRUE(SendPacket(socket, EncodeSessionMessage(SessionCall{7, SessionCallKind::kOpen, "a"}),
                         -1).ok());
  auto first = AnswerOf(socket, 7);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->reply, "echo a");
  // Garbage, and a message only memd sends: dropped, the session goes on.
  ASSERT_TRUE(SendPacket(socket, "garbage", -1).ok());
  ASSERT_TRUE(SendPacket(socket, EncodeSessionMessage(SessionFd{3}), -1).ok());
  ASSERT_TRUE(SendPacket(socket, EncodeSessionMessage(SessionCall{8, SessionCallKind::kSeal, "b"}),
                         -1).ok());
  auto second = AnswerOf(socket, 8);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->reply, "echo b");
  EXPECT_EQ(calls_, 2u);
  EXPECT_EQ(server->size(), 1u);
}

// One client floods calls and reads no answer: its answers stop at its
// in-flight bound, and the server's thread, taking one call a turn from
// each socket, still answers everyone else.
TEST_F(SessionServerTest, AFloodOfCallsCostsOnlyTheFlooder) {
  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/true, /*in_flight=*/8);
  ASSERT_TRUE(server->Start().ok());
  auto flooder = Greeted();
  auto other = Greeted();
  ASSERT_TRUE(flooder.ok() && other.ok());
  const int flood = flooder->first.get();
  int sent = 0;
  while (sent < 2000 &&
         SendPacket(flood, EncodeSessionMessage(SessionCall{static_cast<std::uint64_t>(sent + 1),
                                                            SessionCallKind::kRelease, "x"}),
                    -1, MSG_DONTWAIT).ok()) {
    ++sent;
  }
  ASSERT_GT(sent, 8);
  ASSERT_TRUE(SendPacket(other->first.get(),
                         EncodeSessionMessage(SessionCall{1, SessionCallKind::kOpen, "mine"}), -1)
                  .ok());
  auto answer = AnswerOf(other->first.get(), 1);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->reply, "echo mine");
  // Every flooded call handled, then what waits for the flooder counted.
  ASSERT_TRUE(test::PollUntil([&] { return calls_.load() >= static_cast<std::uint64_t>(sent) + 1; }));
  int answers = 0;
  for (;;) {
    auto packet = ReceivePacket(flood, 4096, MSG_DONTWAIT);
    ASSERT_TRUE(packet.ok());
    if (!packet->has_value()) break;
    ++answers;
  }
  EXPECT_LE(answers, 8) << "answers stop at the in-flight bound";
}

TEST_F(SessionServerTest, AHangUpEndsTheSessionOnce) {
  std::unique_ptr<SessionServer> server = MakeServer(/*refuse=*/true);
  ASSERT_TRUE(server->Start().ok());
  {
    auto client = Greeted();
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(server->size(), 1u);
  }
  ASSERT_TRUE(first_end_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(server->size(), 0u);
  auto next = Greeted();
  ASSERT_TRUE(next.ok());
  server->Stop();
  EXPECT_EQ(started_, 2u);
  EXPECT_EQ(ended_, 2u);
}

}  // namespace
}  // namespace memd::session
