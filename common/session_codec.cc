#include "common/session_codec.h"

#include <limits>

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
  void operator()(const SessionFreed& freed) const {
    v1::BuffersFreed* proto = out->mutable_freed();
    for (std::uint64_t id : freed.buffer_ids) proto->add_buffer_ids(id);
  }
};

}  // namespace

std::string EncodeSessionMessage(const SessionMessage& message) {
  v1::SessionMessage proto;
  std::visit(ToProto{&proto}, message);
  return proto.SerializeAsString();
}

absl::StatusOr<SessionMessage> DecodeSessionMessage(absl::string_view bytes) {
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
    case v1::SessionMessage::kFreed:
      return SessionFreed{{proto.freed().buffer_ids().begin(), proto.freed().buffer_ids().end()}};
    case v1::SessionMessage::KIND_NOT_SET:
      break;
  }
  return absl::DataLossError(
      "a session message of a kind this build does not know (or of none)");
}

}  // namespace memd
