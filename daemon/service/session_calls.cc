// The fast control path (memd.v1.SessionCall): Open, Release and Seal over
// the session socket, with the same checks and broker calls as their gRPC
// methods (memd_service.cc), answered without blocking on the session
// server's thread.

#include "absl/strings/str_cat.h"
#include "common/session_codec.h"
#include "common/status_macros.h"
#include "daemon/service/convert.h"
#include "daemon/service/memd_service.h"
#include "spdlog/spdlog.h"

namespace memd::service {
namespace {

template <typename Message>
absl::Status Parse(const SessionCall& call, Message* message) {
  if (!message->ParseFromString(call.request)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", SessionCallName(call.kind), " call's request is no ",
        Message::descriptor()->full_name(), " (", call.request.size(), " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

void MemdService::HandleSessionCall(session::Session& session, const SessionCall& call) {
  const absl::Time start = absl::Now();
  SessionAnswer answer;
  answer.call_id = call.call_id;
  bool answered = false;
  absl::Status status;
  if (call.call_id == 0 && call.kind != SessionCallKind::kRelease) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "a ", SessionCallName(call.kind), " call must name a call_id: only a Release may go "
        "unanswered"));
  } else {
    switch (call.kind) {
      case SessionCallKind::kOpen:
        status = SessionOpen(session, call, answer, &answered);
        break;
      case SessionCallKind::kSeal:
        status = SessionSeal(session, call, answer);
        break;
      case SessionCallKind::kRelease:
        status = SessionRelease(session, call);
        break;
      case SessionCallKind::kBarrier:
        // Nothing to do: the calls before it on this socket are done.
        break;
      case SessionCallKind::kUnknown:
        status = absl::InvalidArgumentError(
            "the session socket takes only Open, Release, Seal and Barrier calls; send the "
            "rest over gRPC");
        break;
    }
  }
  // A Barrier is no method of memd's: not counted as one.
  if (call.kind != SessionCallKind::kBarrier) Observe(SessionCallName(call.kind), status.code(), start);
  if (!status.ok()) spdlog::debug("{} (session socket) failed: {}", SessionCallName(call.kind),
                                  status.ToString());
  if (answered || call.call_id == 0) return;
  answer.code = static_cast<int>(status.code());
  answer.message = std::string(status.message());
  if (!status.ok()) answer.reply.clear();
  // A client that does not read its answers gets no more of them: its
  // calls then time out, which costs it alone.
  if (absl::Status sent = session.SendAnswer(answer, -1); !sent.ok()) {
    spdlog::debug("answer to session {}: {}", session.id(), sent.ToString());
  }
}

absl::Status MemdService::SessionOpen(session::Session& session, const SessionCall& call,
                                      SessionAnswer& answer, bool* answered) {
  v1::OpenRequest request;
  MEMD_RETURN_IF_ERROR(Parse(call, &request));
  if (request.wait_timeout_ms() > 0 || !request.location().empty() ||
      request.wait_for_memory_ms() > 0) {
    return absl::InvalidArgumentError(
        "an Open over the session socket waits for nothing: wait_timeout_ms, location and "
        "wait_for_memory_ms must be unset (send such an open over gRPC)");
  }
  MEMD_ASSIGN_OR_RETURN(broker::OpenParams params, FromProto(request));
  params.wait_for_seal = false;
  // As the gRPC Open without a wait: the broker answers at once.
  MEMD_ASSIGN_OR_RETURN(std::optional<broker::Grant> grant,
                        AskBroker(broker_, session.id(), std::move(params), 0, nullptr));
  if (!grant.has_value()) return absl::InternalError("the broker left an open waiting");
  v1::Lease lease;
  FillLease(*grant, 0, &lease);
  answer.reply = lease.SerializeAsString();
  // The descriptor rides in the answer; the grant keeps it open until sent.
  const int fd = NeedsDescriptor(*grant, request.mapped_buffer_id()) ? grant->handle.fd : -1;
  absl::Status sent = session.SendAnswer(answer, fd);
  if (sent.ok()) {
    *answered = true;
    return absl::OkStatus();
  }
  // The error answer may not fit either: the client's call times out.
  return UndoGrant(session, *grant, sent);
}

absl::Status MemdService::SessionSeal(session::Session& session, const SessionCall& call,
                                      SessionAnswer& answer) {
  v1::SealRequest request;
  MEMD_RETURN_IF_ERROR(Parse(call, &request));
  v1::SealReply reply;
  MEMD_RETURN_IF_ERROR(SealLease(session.id(), request, &reply));
  answer.reply = reply.SerializeAsString();
  return absl::OkStatus();
}

absl::Status MemdService::SessionRelease(session::Session& session, const SessionCall& call) {
  v1::ReleaseRequest request;
  MEMD_RETURN_IF_ERROR(Parse(call, &request));
  return broker_.Release(session.id(), request.lease_id());
}

}  // namespace memd::service
