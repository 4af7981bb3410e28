#pragma once

// A session opened by hand, as a client that is not libmemd would: the
// session socket (kept open to keep the session) with the token the daemon
// greets it with, and a stub for raw gRPC calls libmemd would never make.

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/paths.h"
#include "common/unix_socket.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "memd/v1/memd.grpc.pb.h"

namespace memd::testing {

struct RawSession {
  UniqueFd socket;
  std::string token;
  std::unique_ptr<v1::Memd::Stub> stub;

  // Connects to the daemon serving `socket_dir`; test failures on error.
  static RawSession Open(const std::string& socket_dir) {
    RawSession raw;
    auto socket = ConnectUnix(SessionSocketPath(socket_dir), SOCK_SEQPACKET);
    EXPECT_TRUE(socket.ok()) << socket.status();
    if (!socket.ok()) return raw;
    auto packet = ReceivePacket(socket->get(), 4096);
    EXPECT_TRUE(packet.ok() && packet->has_value());
    v1::SessionMessage hello;
    if (packet.ok() && packet->has_value()) {
      EXPECT_TRUE(hello.ParseFromString((*packet)->bytes));
    }
    raw.socket = std::move(*socket);
    raw.token = hello.hello().token();
    raw.stub = v1::Memd::NewStub(grpc::CreateChannel(
        "unix:" + ControlSocketPath(socket_dir), grpc::InsecureChannelCredentials()));
    return raw;
  }

  // One call as this session (its token as metadata).
  template <typename Method, typename Request, typename Reply>
  grpc::Status Call(Method method, const Request& request, Reply* reply) const {
    grpc::ClientContext context;
    context.AddMetadata("memd-session", token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return (stub.get()->*method)(&context, request, reply);
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

}  // namespace memd::testing
