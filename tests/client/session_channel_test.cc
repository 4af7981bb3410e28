// SessionChannel's half of the fast control path, against a daemon end
// this test plays by hand: calls and their answers, and the ordering of
// Releases that want no answer (a Barrier before a call on another path,
// only when one is needed).

#include "client/src/session_channel.h"

#include <poll.h>
#include <sys/socket.h>
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

class SessionChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = ListenUnix(SessionSocketPath(dir_.path()), SOCK_SEQPACKET, 0600);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    // The daemon's end: accept and greet with protocol version 2, on a
    // thread, while Connect waits for the greeting.
    std::thread daemon([&] {
      daemon_.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      SessionHello hello;
      hello.protocol_version = kFirstVersionWithCalls;
      hello.session_id = 1;
      hello.token = std::string(32, 'a');
      (void)SendPacket(daemon_.get(), EncodeSessionMessage(hello), -1);
    });
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

}  // namespace
}  // namespace memd::internal
