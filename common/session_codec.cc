#include "common/session_codec.h"

#include <limits>

#include "common/session_wire.h"
#include "memd/v1/memd.pb.h"

namespace memd {
namespace {

// Fills the protobuf form of each alternative (std::visit's overload set).
struct ToProto {
  v1::SessionMessage* out;
  void operator()(const SessionHello& hello) const {
    v1::SessionHello* proto = out->mutable_hello();
    proto->set_protocol_version(hello.protocol_version);
    proto->set_session_id(hello.session_id);
    proto->set_token(hello.token);
    proto->set_error(hello.error);
    proto->set_error_code(hello.error_code);
  }
  void operator()(const SessionFd& fd) const { out->mutable_fd()->set_seq(fd.seq); }
  void operator()(const SessionCall& call) const {
    v1::SessionCall* proto = out->mutable_call();
    proto->set_call_id(call.call_id);
    proto->set_kind(static_cast<v1::SessionCallKind>(call.kind));
    proto->set_request(call.request);
  }
  void operator()(const SessionAnswer& answer) const {
    v1::SessionAnswer* proto = out->mutable_answer();
    proto->set_call_id(answer.call_id);
    proto->set_code(answer.code);
    proto->set_message(answer.message);
    proto->set_reply(answer.reply);
  }
  void operator()(const SessionFreed& freed) const {
    v1::BuffersFreed* proto = out->mutable_freed();
    for (std::uint64_t id : freed.buffer_ids) proto->add_buffer_ids(id);
  }
};

}  // namespace

SessionCallKind SessionCallKindOf(int number) {
  switch (number) {
    case v1::SESSION_OPEN: return SessionCallKind::kOpen;
    case v1::SESSION_RELEASE: return SessionCallKind::kRelease;
    case v1::SESSION_SEAL: return SessionCallKind::kSeal;
    case v1::SESSION_BARRIER: return SessionCallKind::kBarrier;
    default: return SessionCallKind::kUnknown;
  }
}

const char* SessionCallName(SessionCallKind kind) {
  switch (kind) {
    case SessionCallKind::kOpen: return "Open";
    case SessionCallKind::kRelease: return "Release";
    case SessionCallKind::kSeal: return "Seal";
    case SessionCallKind::kBarrier: return "Barrier";
    case SessionCallKind::kUnknown: break;
  }
  return "unknown";
}

std::string EncodeSessionMessage(const SessionCall& call) {
  return session_wire::EncodeCall(call);
}

std::string EncodeSessionMessage(const SessionAnswer& answer) {
  return session_wire::EncodeAnswer(answer);
}

std::string EncodeSessionMessage(const SessionMessage& message) {
  if (const auto* call = std::get_if<SessionCall>(&message)) return session_wire::EncodeCall(*call);
  if (const auto* answer = std::get_if<SessionAnswer>(&message)) {
    return session_wire::EncodeAnswer(*answer);
  }
  v1::SessionMessage proto;
  std::visit(ToProto{&proto}, message);
  return proto.SerializeAsString();
}

absl::StatusOr<SessionMessage> DecodeSessionMessage(absl::string_view bytes) {
  if (std::optional<SessionMessage> fast = session_wire::DecodeCallOrAnswer(bytes)) {
    return std::move(*fast);
  }
  v1::SessionMessage proto;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("a packet on the session socket is not a session message");
  }
  switch (proto.kind_case()) {
    case v1::SessionMessage::kHello:
      return SessionHello{proto.hello().protocol_version(), proto.hello().session_id(),
                          proto.hello().token(), proto.hello().error(),
                          proto.hello().error_code()};
    case v1::SessionMessage::kFd:
      return SessionFd{proto.fd().seq()};
    case v1::SessionMessage::kCall: {
      const v1::SessionCall& call = proto.call();
      return SessionCall{call.call_id(), SessionCallKindOf(call.kind()), call.request()};
    }
    case v1::SessionMessage::kAnswer:
      return SessionAnswer{proto.answer().call_id(), proto.answer().code(),
                           proto.answer().message(), proto.answer().reply()};
    case v1::SessionMessage::kFreed:
      return SessionFreed{{proto.freed().buffer_ids().begin(), proto.freed().buffer_ids().end()}};
    case v1::SessionMessage::KIND_NOT_SET:
      break;
  }
  return absl::DataLossError(
      "a session message of a kind this build does not know (or of none)");
}

}  // namespace memd
