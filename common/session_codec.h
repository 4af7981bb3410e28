#pragma once

// The session socket's wire format, in one place for both ends: the daemon
// (daemon/session) encodes, the client library and tests decode. Plain C++
// in and out; the bytes are memd.v1.SessionMessage (proto/memd/v1/memd.proto,
// the contract), but only session_codec.cc sees protobuf, so the session
// layer stays free of it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memd {

// The version of the session protocol this build speaks. 2: the daemon
// takes SessionCalls (the fast control path).
inline constexpr std::uint32_t kSessionProtocolVersion = 2;
inline constexpr std::uint32_t kFirstVersionWithCalls = 2;

// The daemon's first packet after accept: the session's id and the token its
// gRPC calls carry, or, when `error` is set, why the daemon refused the
// session (`error_code` an absl/gRPC status code number; the socket then
// closes).
struct SessionHello {
  std::uint32_t protocol_version = 0;
  std::uint64_t session_id = 0;
  std::string token;
  std::string error;
  int error_code = 0;
};

// The packet that carries one descriptor in SCM_RIGHTS: the sequence number
// the gRPC reply names (Handle.fd_seq).
struct SessionFd {
  std::uint64_t seq = 0;
};

// Device buffers memd freed that the session asked to hear of
// (OpenRequest.notify_freed). No descriptor.
struct SessionFreed {
  std::vector<std::uint64_t> buffer_ids;
};

// Most ids in one SessionFreed packet: it stays one small packet.
inline constexpr std::size_t kMaxFreedIdsPerPacket = 64;

// The fast control path (memd.v1.SessionCall, SessionAnswer): a request of
// the gRPC method `kind` names, as the bytes of its protocol message, and
// its answer. call_id 0: no answer wanted.
enum class SessionCallKind { kUnknown = 0, kOpen = 1, kRelease = 2, kSeal = 3, kBarrier = 4 };
struct SessionCall {
  std::uint64_t call_id = 0;
  SessionCallKind kind = SessionCallKind::kUnknown;
  std::string request;
};
struct SessionAnswer {
  std::uint64_t call_id = 0;
  int code = 0;  // An absl status code number.
  std::string message;
  std::string reply;
};

// The kind a SessionCallKind enum number stands for: kUnknown for a number
// this build does not know.
SessionCallKind SessionCallKindOf(int number);

// The method name a call kind stands for ("Open"...), as metrics and logs
// name it; "unknown" for others.
const char* SessionCallName(SessionCallKind kind);

// One packet of the session socket.
using SessionMessage =
    std::variant<SessionHello, SessionFd, SessionFreed, SessionCall, SessionAnswer>;

// The bytes of one packet. Never fails. Calls and answers, the fast control
// path's packets, are written by hand (session_wire.h), the rest by protobuf.
std::string EncodeSessionMessage(const SessionMessage& message);
// The same for a call or an answer, which would otherwise be copied (request
// or reply bytes included) into a SessionMessage first.
std::string EncodeSessionMessage(const SessionCall& call);
std::string EncodeSessionMessage(const SessionAnswer& answer);

// The message in one packet (calls and answers of the usual shape read by
// hand, session_wire.h; anything else by protobuf). Errors: DATA_LOSS (not a session message, or
// one of a kind this build does not know).
absl::StatusOr<SessionMessage> DecodeSessionMessage(absl::string_view bytes);

}  // namespace memd
