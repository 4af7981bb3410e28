// MemdService's replica calls: Prefetch, DropReplica, Sync, and Advise. Opens at a
// location are Open's (memd_service.cc).

#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "daemon/service/convert.h"
#include "daemon/service/memd_service.h"

namespace memd::service {

grpc::ServerUnaryReactor* MemdService::Prefetch(grpc::CallbackServerContext* context,
                                                const v1::PrefetchRequest* request,
                                                v1::BufferInfo* reply) {
  auto params = FromProto(*request);
  if (!params.ok()) return Respond(context, "Prefetch", [&] { return params.status(); });
  auto answer = [reply](session::Session&, broker::Grant grant) {
    ToProto(grant.buffer, reply);
    return absl::OkStatus();
  };
  if (request->wait_for_memory_ms() > 0) {
    // It waits for the copy too, even without wait_timeout_ms.
    return CopyWaitingForMemoryCall(context, "Prefetch", std::move(*params),
                                    request->wait_timeout_ms(), request->wait_for_memory_ms(),
                                    answer);
  }
  if (request->wait_timeout_ms() > 0) {
    return OpenMaybeWaiting(context, "Prefetch", std::move(*params), request->wait_timeout_ms(),
                            /*for_copy=*/true, answer);
  }
  // Without a wait: start the copy, and answer with the buffer as it is
  // then (its copy there "filling", or "current" when it was already).
  return Respond(context, "Prefetch", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    const broker::WatchId watch = broker_.NewWatchId();
    MEMD_ASSIGN_OR_RETURN(std::optional<broker::Grant> made,
                          broker_.OpenOrWatch(session->id(), *params, watch, [] {}));
    if (made.has_value()) {
      ToProto(made->buffer, reply);
      return absl::OkStatus();
    }
    broker_.CancelWatch(watch);
    MEMD_ASSIGN_OR_RETURN(broker::BufferInfo info, broker_.Stat(session->id(), params->name));
    ToProto(info, reply);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::DropReplica(grpc::CallbackServerContext* context,
                                                   const v1::DropReplicaRequest* request,
                                                   v1::BufferInfo* reply) {
  return Respond(context, "DropReplica", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(Location at, ReplicaLocation(request->location()));
    MEMD_ASSIGN_OR_RETURN(broker::BufferInfo info,
                          broker_.DropReplica(session->id(), request->name(), at));
    ToProto(info, reply);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Sync(grpc::CallbackServerContext* context,
                                            const v1::SyncRequest* request,
                                            v1::BufferInfo* reply) {
  return Respond(context, "Sync", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(broker::BufferInfo info,
                          broker_.Sync(session->id(), request->lease_id()));
    ToProto(info, reply);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Advise(grpc::CallbackServerContext* context,
                                              const v1::AdviseRequest* request,
                                              v1::AdviseReply* reply) {
  return Respond(context, "Advise", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(std::vector<broker::Recommendation> advice,
                          broker_.Advise(session->id(), request->prefix()));
    for (const broker::Recommendation& one : advice) ToProto(one, reply->add_recommendations());
    return absl::OkStatus();
  });
}

}  // namespace memd::service
