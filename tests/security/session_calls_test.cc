// Issue 28, target 4: Open, Release and Seal also travel over the session
// socket (the fast control path). The session is the caller there, with no
// token, so every check the gRPC methods make must hold on this path too:
// modes, lease ownership, per-session limits, and nothing that can make the
// session server's thread wait. Mallory speaks the session protocol by hand
// (no libmemd, no gRPC) as another uid; the other security tests run their
// libmemd clients over both paths (their ".grpc." copies force gRPC).

#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/paths.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "memd/v1/memd.pb.h"
#include "tests/security/open_daemon.h"
#include "tests/support/hostile.h"
#include "tests/support/poll_until.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::kMallory;

// One call as Mallory would send it.
struct RawCall {
  std::uint64_t call_id = 1;
  SessionCallKind kind = SessionCallKind::kOpen;
  std::string request;
};

std::string OpenRequest(const std::string& name, std::uint64_t wait_ms = 0) {
  v1::OpenRequest open;
  open.set_name(name);
  open.set_access(v1::READ);
  open.set_wait_timeout_ms(wait_ms);
  return open.SerializeAsString();
}

std::string LeaseRequest(SessionCallKind kind, std::uint64_t lease) {
  if (kind == SessionCallKind::kSeal) {
    v1::SealRequest seal;
    seal.set_lease_id(lease);
    return seal.SerializeAsString();
  }
  v1::ReleaseRequest release;
  release.set_lease_id(lease);
  return release.SerializeAsString();
}

class SessionCallsTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override {
    config_.max_leases_per_session = 4;
    StartDaemon();
    auto client = Client::Connect({.socket_dir = config_.socket_dir});
    ASSERT_TRUE(client.ok()) << client.status();
    root_ = std::move(*client);
  }

  // Mallory's session makes `calls` in turn (a call with call_id 0 waits
  // 200 ms for an answer that should not come).
  std::vector<std::string> AsMallory(const std::vector<RawCall>& calls) {
    // Encoded and decoded here: the forked child makes system calls only,
    // since another thread of this process (the daemon's, gRPC's) may hold
    // a lock of a library at the fork.
    std::vector<std::string> packets;
    for (const RawCall& call : calls) {
      packets.push_back(EncodeSessionMessage(SessionCall{call.call_id, call.kind, call.request}));
    }
    const std::string socket_path = SessionSocketPath(config_.socket_dir);
    // Per call: '-' (nothing came), or 'p'/'f' (a packet, with a descriptor
    // for 'f'), its length as 4 bytes, and its bytes.
    test::ChildResult child = test::ForkAs(kMallory, kMallory, [&](int out) {
      auto socket = ConnectUnix(socket_path, SOCK_SEQPACKET);
      if (!socket.ok()) return 10;
      pollfd greeted{socket->get(), POLLIN, 0};
      if (::poll(&greeted, 1, 10000) != 1) return 11;
      if (!ReceivePacket(socket->get(), 4096).ok()) return 12;
      std::string report;
      for (std::size_t i = 0; i < calls.size(); ++i) {
        if (!SendPacket(socket->get(), packets[i], -1).ok()) return 13;
        pollfd answered{socket->get(), POLLIN, 0};
        if (::poll(&answered, 1, calls[i].call_id == 0 ? 200 : 10000) != 1) {
          report += '-';
          continue;
        }
        auto packet = ReceivePacket(socket->get(), 4096);
        if (!packet.ok() || !packet->has_value()) return 14;
        const std::string& bytes = (*packet)->bytes;
        const std::uint32_t length = static_cast<std::uint32_t>(bytes.size());
        report += (*packet)->fd ? 'f' : 'p';
        report.append(reinterpret_cast<const char*>(&length), sizeof(length));
        report += bytes;
      }
      test::WriteAll(out, report);
      return 0;
    });
    EXPECT_EQ(child.exit_code, 0) << child.out;
    // One line per call: the answer's code, "fd" when a descriptor came
    // with it, and its message; "-" when nothing came.
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < child.out.size() && child.exit_code == 0;) {
      const char kind = child.out[at++];
      if (kind == '-') {
        lines.push_back("-");
        continue;
      }
      std::uint32_t length = 0;
      if (at + sizeof(length) > child.out.size()) break;
      std::memcpy(&length, child.out.data() + at, sizeof(length));
      at += sizeof(length);
      auto message = DecodeSessionMessage(absl::string_view(child.out).substr(at, length));
      at += length;
      const auto* answer = message.ok() ? std::get_if<SessionAnswer>(&*message) : nullptr;
      if (answer == nullptr) {
        lines.push_back("not an answer");
        continue;
      }
      lines.push_back(absl::StrCat(answer->code, kind == 'f' ? " fd " : " - ", answer->message));
    }
    return lines;
  }

  void Publish(const std::string& name, std::uint32_t mode) {
    auto buffer = root_->Create(name, 4096, {.location = "host", .mode = mode});
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(buffer->Seal().ok());
  }

  std::unique_ptr<Client> root_;
};

TEST_F(SessionCallsTest, AModeThatHidesABufferHidesItOnThisPathToo) {
  ASSERT_NO_FATAL_FAILURE(Publish("private", 0600));
  ASSERT_NO_FATAL_FAILURE(Publish("public", 0644));
  const std::vector<std::string> lines =
      AsMallory({{1, SessionCallKind::kOpen, OpenRequest("private")},
                 {2, SessionCallKind::kOpen, OpenRequest("public")}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr(absl::StrCat(static_cast<int>(absl::StatusCode::kPermissionDenied),
                                               " - ")));
  EXPECT_THAT(lines[1], HasSubstr("0 fd ")) << "the control: a readable buffer opens";
}

TEST_F(SessionCallsTest, AnotherSessionsLeaseCannotBeReleasedOrSealed) {
  auto held = root_->Create("victim", 4096, {.location = "host"});
  ASSERT_TRUE(held.ok()) << held.status();
  const std::uint64_t lease = held->lease_id();
  const std::vector<std::string> lines =
      AsMallory({{1, SessionCallKind::kSeal, LeaseRequest(SessionCallKind::kSeal, lease)},
                 {2, SessionCallKind::kRelease, LeaseRequest(SessionCallKind::kRelease, lease)}});
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr(absl::StrCat(static_cast<int>(absl::StatusCode::kNotFound), " - ")));
  }
  auto info = root_->Stat("victim");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->lease_count, 1u) << "the owner's lease lives";
  EXPECT_EQ(info->state, BufferState::kCreating) << "nobody else sealed it";
  EXPECT_TRUE(held->Seal().ok());
}

TEST_F(SessionCallsTest, ThePerSessionLeaseLimitHolds) {
  ASSERT_NO_FATAL_FAILURE(Publish("public", 0644));
  std::vector<RawCall> calls;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    calls.push_back({id, SessionCallKind::kOpen, OpenRequest("public")});
  }
  const std::vector<std::string> lines = AsMallory(calls);
  ASSERT_EQ(lines.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_THAT(lines[i], HasSubstr("0 fd ")) << i;
  for (int i = 4; i < 6; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("max_leases_per_session")) << i;
  }
}

TEST_F(SessionCallsTest, WhatCouldWaitOrIsMalformedIsRefusedWithAReason) {
  ASSERT_NO_FATAL_FAILURE(Publish("public", 0644));
  const int invalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = AsMallory({
      {1, SessionCallKind::kOpen, OpenRequest("public", /*wait_ms=*/60000)},
      {2, SessionCallKind::kOpen, "\xff\xff\xff garbage"},
      {3, SessionCallKind::kUnknown, OpenRequest("public")},
      {0, SessionCallKind::kOpen, OpenRequest("public")},  // Wants no answer.
      {4, SessionCallKind::kOpen, OpenRequest("public")},  // The session goes on.
  });
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr(absl::StrCat(invalid, " - an Open over the session socket "
                                                        "waits for nothing")));
  EXPECT_THAT(lines[1], HasSubstr(absl::StrCat(invalid, " - the Open call's request is no "
                                                        "memd.v1.OpenRequest")));
  EXPECT_THAT(lines[2], HasSubstr(absl::StrCat(invalid, " - the session socket takes only")));
  EXPECT_EQ(lines[3], "-") << "an Open without a call id is not made";
  EXPECT_THAT(lines[4], HasSubstr("0 fd "));
  // Mallory's session ended, and its one lease with it.
  EXPECT_TRUE(test::PollUntil([&] {
    auto info = root_->Stat("public");
    return info.ok() && info->lease_count == 0;
  }));
}

}  // namespace
}  // namespace memd
