#include "common/session_codec.h"

#include <limits>

#include "common/session_wire.h"
#include "memd/v1/memd.pb.h"

namespace memd {
namespace {

// The bytes of each alternative (std::visit's overload set): calls and
// answers, the fast control path's, by hand; the rest through protobuf.
struct Encoder {
  std::string operator()(const SessionCall& call) const { return session_wire::EncodeCall(call); }
  std::string operator()(const SessionAnswer& answer) const {
    return session_wire::EncodeAnswer(answer);
  }
  std::string operator()(const SessionHello& hello) const {
    v1::SessionMessage proto;
    v1::SessionHello* out = proto.mutable_hello();
    out->set_protocol_version(hello.protocol_version);
    out->set_session_id(hello.session_id);
    out->set_token(hello.token);
    out->set_error(hello.error);
    out->set_error_code(hello.error_code);
    return proto.SerializeAsString();
  }
  std::string operator()(const SessionFd& fd) const {
    v1::SessionMessage proto;
    proto.mutable_fd()->set_seq(fd.seq);
    return proto.SerializeAsString();
  }
  std::string operator()(const SessionFreed& freed) const {
    v1::SessionMessage proto;
    v1::BuffersFreed* out = proto.mutable_freed();
    for (std::uint64_t id : freed.buffer_ids) out->add_buffer_ids(id);
    return proto.SerializeAsString();
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

std::string EncodeSessionMessage(const SessionCall& call) { return Encoder{}(call); }

std::string EncodeSessionMessage(const SessionAnswer& answer) { return Encoder{}(answer); }

std::string EncodeSessionMessage(const SessionMessage& message) {
  return std::visit(Encoder{}, message);
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
