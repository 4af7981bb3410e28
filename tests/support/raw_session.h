#pragma once

// A session opened by hand, as a client that is not libmemd would: the
// session socket (kept open to keep the session) with the token the daemon
// greets it with, and a stub for raw gRPC calls libmemd would never make.
// Header-only; users link memd's protobuf library (memd::proto) and the
// session codec (memd::session_codec).

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/paths.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "memd/v1/memd.grpc.pb.h"

namespace memd::test {

struct RawSession {
  UniqueFd socket;
  std::string token;
  std::uint64_t id = 0;
  std::unique_ptr<v1::Memd::Stub> stub;

  // Connects to the daemon serving `socket_dir` and reads its greeting.
  // Errors: the connection's, or the daemon's refusal (its code and text).
  static absl::StatusOr<RawSession> Connect(const std::string& socket_dir) {
    RawSession raw;
    auto socket = ConnectUnix(SessionSocketPath(socket_dir), SOCK_SEQPACKET);
    if (!socket.ok()) return socket.status();
    auto packet = ReceivePacket(socket->get(), 4096);
    if (!packet.ok()) return packet.status();
    if (!packet->has_value()) return absl::DataLossError("no greeting");
    auto message = DecodeSessionMessage((*packet)->bytes);
    if (!message.ok()) return message.status();
    const auto* hello = std::get_if<SessionHello>(&*message);
    if (hello == nullptr) return absl::DataLossError("no greeting");
    if (!hello->error.empty()) {
      return absl::Status(static_cast<absl::StatusCode>(hello->error_code), hello->error);
    }
    raw.socket = std::move(*socket);
    raw.token = hello->token;
    raw.id = hello->session_id;
    // A channel of its own, as libmemd's: one shared through gRPC's
    // process-wide pool with a session of a memd that died since fails its
    // first call ("Broken pipe").
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    raw.stub = v1::Memd::NewStub(grpc::CreateCustomChannel(
        "unix:" + ControlSocketPath(socket_dir), grpc::InsecureChannelCredentials(), arguments));
    return raw;
  }

  // Connect, with a test failure on error.
  static RawSession Open(const std::string& socket_dir) {
    auto raw = Connect(socket_dir);
    EXPECT_TRUE(raw.ok()) << raw.status();
    return raw.ok() ? std::move(*raw) : RawSession{};
  }

  // One call as this session (its token as metadata).
  template <typename Method, typename Request, typename Reply>
  grpc::Status Call(Method method, const Request& request, Reply* reply) const {
    grpc::ClientContext context;
    context.AddMetadata("memd-session", token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return (stub.get()->*method)(&context, request, reply);
  }

  // The descriptor the daemon sent with `seq` (others before it are
  // closed). Errors: DEADLINE_EXCEEDED, the socket's.
  absl::StatusOr<UniqueFd> TakeFd(std::uint64_t seq,
                                  absl::Duration timeout = absl::Seconds(10)) const {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      pollfd readable{socket.get(), POLLIN, 0};
      const int left = static_cast<int>(
          absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (left <= 0 || ::poll(&readable, 1, left) == 0) {
        return absl::DeadlineExceededError(absl::StrCat("no descriptor ", seq));
      }
      auto packet = ReceivePacket(socket.get(), 4096, MSG_DONTWAIT);
      if (!packet.ok()) return packet.status();
      if (!packet->has_value()) continue;
      auto message = DecodeSessionMessage((*packet)->bytes);
      const auto* sent = message.ok() ? std::get_if<SessionFd>(&*message) : nullptr;
      if (sent != nullptr && sent->seq == seq) return std::move((*packet)->fd);
    }
  }

  // Reads and closes the descriptors the daemon sent, which otherwise pile
  // up in the socket until sends fail.
  void Drain() const {
    for (;;) {
      auto packet = ReceivePacket(socket.get(), 4096, MSG_DONTWAIT);
      if (!packet.ok() || !packet->has_value()) return;
    }
  }
};

}  // namespace memd::test
