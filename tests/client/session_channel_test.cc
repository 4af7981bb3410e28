// SessionChannel's half of the fast control path, against a daemon end
// this test plays by hand: calls and their answers, and the ordering of
// Releases that want no answer (a Barrier before a call on another path,
// only when one is needed).

#include "client/src/session_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <thread>
#include <variant>

#include "common/paths.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd::internal {
namespace {

// The daemon's end: accepts one client on `listener` and greets it with
// protocol version 2, on a thread, while the client waits for the greeting.
// The accepted socket goes to `accepted`.
std::thread GreetOne(int listener, UniqueFd& accepted) {
  return std::thread([listener, &accepted] {
    accepted.reset(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    SessionHello hello;
    hello.protocol_version = kFirstVersionWithCalls;
    hello.session_id = 1;
    hello.token = std::string(32, 'a');
    (void)SendPacket(accepted.get(), EncodeSessionMessage(hello), -1);
  });
}

class SessionChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = ListenUnix(SessionSocketPath(dir_.path()), SOCK_SEQPACKET, 0600);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    std::thread daemon = GreetOne(listener_.get(), daemon_);
    auto channel = SessionChannel::Connect(dir_.path(), absl::Seconds(10),
                                           DaemonTrust{::geteuid(), std::nullopt});
    daemon.join();
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = std::move(*channel);
    ASSERT_TRUE(channel_->takes_calls());
  }

  // The next call the daemon's end receives within `millis`, if any (0:
  // one already sent, as everything SessionChannel sends is before it
  // returns).
  std::optional<SessionCall> NextCall(int millis = 10000) {
    pollfd readable{daemon_.get(), POLLIN, 0};
    if (::poll(&readable, 1, millis) != 1) return std::nullopt;
    auto packet = ReceivePacket(daemon_.get(), 4096, MSG_DONTWAIT);
    if (!packet.ok() || !packet->has_value()) return std::nullopt;
    auto message = DecodeSessionMessage((*packet)->bytes);
    if (!message.ok()) return std::nullopt;
    const auto* call = std::get_if<SessionCall>(&*message);
    if (call == nullptr) return std::nullopt;
    return *call;
  }

  void Answer(const SessionCall& call, const std::string& reply) {
    ASSERT_TRUE(SendPacket(daemon_.get(),
                           EncodeSessionMessage(SessionAnswer{call.call_id, 0, "", reply}), -1)
                    .ok());
  }

  test::TempDir dir_;
  UniqueFd listener_;
  UniqueFd daemon_;
  std::unique_ptr<SessionChannel> channel_;
};

TEST_F(SessionChannelTest, ACallGetsItsOwnAnswer) {
  std::thread daemon([&] {
    std::optional<SessionCall> call = NextCall();
    ASSERT_TRUE(call.has_value());
    EXPECT_EQ(call->kind, SessionCallKind::kSeal);
    EXPECT_EQ(call->request, "seal me");
    // Another call's answer first: kept aside, not taken for this one.
    ASSERT_TRUE(SendPacket(daemon_.get(),
                           EncodeSessionMessage(SessionAnswer{call->call_id + 100, 0, "", "other"}),
                           -1)
                    .ok());
    Answer(*call, "sealed");
  });
  auto answer = channel_->Call(SessionCallKind::kSeal, "seal me", absl::Seconds(10));
  daemon.join();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->answer.reply, "sealed");
}

TEST_F(SessionChannelTest, ReleasesAreSettledByABarrierOnlyWhenNoCallCameAfterThem) {
  // Nothing sent: settling sends nothing.
  ASSERT_TRUE(channel_->SettleReleases(absl::Seconds(10)).ok());
  EXPECT_FALSE(NextCall(0).has_value());

  // A Release wants no answer.
  ASSERT_TRUE(channel_->SendRelease("lease 7").ok());
  std::optional<SessionCall> release = NextCall();
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(release->kind, SessionCallKind::kRelease);
  EXPECT_EQ(release->call_id, 0u);

  // Before a call on another path: one Barrier, answered after it.
  std::thread daemon([&] {
    std::optional<SessionCall> barrier = NextCall();
    ASSERT_TRUE(barrier.has_value());
    EXPECT_EQ(barrier->kind, SessionCallKind::kBarrier);
    EXPECT_NE(barrier->call_id, 0u);
    Answer(*barrier, "");
  });
  EXPECT_TRUE(channel_->SettleReleases(absl::Seconds(10)).ok());
  daemon.join();
  // Settled: no second Barrier.
  ASSERT_TRUE(channel_->SettleReleases(absl::Seconds(10)).ok());
  EXPECT_FALSE(NextCall(0).has_value());

  // A Release, then a call on the socket answered after it: that call
  // settled it, so no Barrier either.
  ASSERT_TRUE(channel_->SendRelease("lease 8").ok());
  std::thread answering([&] {
    std::optional<SessionCall> second = NextCall();
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->kind, SessionCallKind::kRelease);
    std::optional<SessionCall> open = NextCall();
    ASSERT_TRUE(open.has_value());
    Answer(*open, "lease");
  });
  ASSERT_TRUE(channel_->Call(SessionCallKind::kOpen, "open", absl::Seconds(10)).ok());
  answering.join();
  ASSERT_TRUE(channel_->SettleReleases(absl::Seconds(10)).ok());
  EXPECT_FALSE(NextCall(0).has_value());
}

TEST_F(SessionChannelTest, AnUnansweredCallTimesOut) {
  auto answer = channel_->Call(SessionCallKind::kOpen, "open", absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(answer.status())) << answer.status();
}

// Issue 29: a user's client did not find the node's system memd in
// /run/memd. ConnectFirst tries the user's own directory, then that one.
class ConnectFirstTest : public ::testing::Test {
 protected:
  // A socket directory of `mode` (mkdir's, as chmod sets it) under root_.
  std::string Dir(const std::string& name, mode_t mode = 0700) {
    const std::string dir = root_.Join(name);
    EXPECT_EQ(::mkdir(dir.c_str(), mode), 0) << dir;
    EXPECT_EQ(::chmod(dir.c_str(), mode), 0) << dir;
    return dir;
  }
  // A directory whose session socket nobody listens on any more (a daemon
  // that died): connect(2) is refused.
  std::string Stale(const std::string& name) {
    const std::string dir = Dir(name);
    EXPECT_TRUE(ListenUnix(SessionSocketPath(dir), SOCK_SEQPACKET, 0600).ok());
    return dir;  // The listener closed, its socket file left.
  }
  absl::StatusOr<SessionChannel::First> ConnectFirst(const std::vector<std::string>& dirs) {
    return SessionChannel::ConnectFirst(dirs, absl::Seconds(10),
                                        DaemonTrust{::geteuid(), std::nullopt});
  }
  // A daemon listening in `dir`, greeting one client.
  void Listen(const std::string& dir) {
    auto listener = ListenUnix(SessionSocketPath(dir), SOCK_SEQPACKET, 0600);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    greeter_ = GreetOne(listener_.get(), daemon_);
  }
  void TearDown() override {
    if (greeter_.joinable()) {
      // An accept still waiting (no client came: the search stopped before
      // this directory) ends: shutdown wakes it, where close would not.
      ::shutdown(listener_.get(), SHUT_RDWR);
      greeter_.join();
      listener_.reset();
    }
  }

  test::TempDir root_;
  UniqueFd listener_;
  UniqueFd daemon_;
  std::thread greeter_;
};

TEST_F(ConnectFirstTest, DirectoriesWithNoDaemonArePassedOverAndTheOneFoundIsSaid) {
  const std::string absent = root_.Join("absent");
  const std::string stale = Stale("stale");
  const std::string live = Dir("live");
  Listen(live);
  auto first = ConnectFirst({absent, stale, live});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->socket_dir, live);
  EXPECT_EQ(first->channel->id(), 1u);
}

TEST_F(ConnectFirstTest, WhenNoneHasADaemonTheErrorNamesEachDirectoryTried) {
  const std::string absent = root_.Join("absent");
  const std::string stale = Stale("stale");
  auto first = ConnectFirst({absent, stale});
  ASSERT_TRUE(absl::IsUnavailable(first.status())) << first.status();
  const std::string message(first.status().message());
  EXPECT_NE(message.find(absent + " (No such file or directory)"), std::string::npos) << message;
  EXPECT_NE(message.find(stale + " (Connection refused)"), std::string::npos) << message;
  EXPECT_NE(message.find("MEMD_SOCKET_DIR"), std::string::npos) << message;
  // One directory (MEMD_SOCKET_DIR, --socket-dir): its own error, as before.
  auto one = ConnectFirst({absent});
  EXPECT_EQ(one.status().message().find("no memd listens on " + absent + "/session.sock"), 0u)
      << one.status();
}

TEST_F(ConnectFirstTest, AnUntrustedDirectoryIsReportedNeverPassedOver) {
  // Others may write it: whoever listens there may not be memd. The search
  // stops there rather than trying the next, and the fallback directory is
  // checked as the first is.
  const std::string open = Dir("open", 0777);
  const std::string live = Dir("live");
  Listen(live);
  auto first = ConnectFirst({open, live});
  EXPECT_TRUE(absl::IsPermissionDenied(first.status())) << first.status();
  auto fallback = ConnectFirst({root_.Join("absent"), open});
  EXPECT_TRUE(absl::IsPermissionDenied(fallback.status())) << fallback.status();
}

TEST(ClientSocketDirsTest, AUsersOwnDirectoryComesFirstThenTheSystemServicesUnlessOneIsSet) {
  ::setenv("MEMD_SOCKET_DIR", "/somewhere/memd", 1);
  EXPECT_EQ(ClientSocketDirs(), std::vector<std::string>{"/somewhere/memd"});
  ::unsetenv("MEMD_SOCKET_DIR");
  const std::vector<std::string> dirs = ClientSocketDirs();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs.front(), DefaultSocketDir());
  EXPECT_EQ(dirs.back(), kSystemSocketDir);
  EXPECT_EQ(dirs.size(), ::geteuid() == 0 ? 1u : 2u);  // Root's own is /run/memd.
  if (::geteuid() != 0) return;
  // As another user (CI runs as root): a child that becomes uid 65534.
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("XDG_RUNTIME_DIR", "/run/user/65534", 1);
    std::string joined;
    if (::seteuid(65534) == 0) {
      for (const std::string& dir : ClientSocketDirs()) joined += dir + ",";
    }
    (void)!::write(out[1], joined.data(), joined.size());
    ::_exit(0);
  }
  ::close(out[1]);
  char text[256] = {};
  const ssize_t got = ::read(out[0], text, sizeof(text) - 1);
  ::close(out[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(std::string(text, got > 0 ? got : 0), "/run/user/65534/memd,/run/memd,");
}

}  // namespace
}  // namespace memd::internal
