// MemdService's reports that judge the registry rather than list it: the
// leak report (Broker::Leaks). Advise, its elder, is with the replica calls.

#include "common/status_macros.h"
#include "daemon/service/convert.h"
#include "daemon/service/memd_service.h"

namespace memd::service {

grpc::ServerUnaryReactor* MemdService::Leaks(grpc::CallbackServerContext* context,
                                             const v1::LeaksRequest* request,
                                             v1::LeaksReply* reply) {
  return Respond(context, "Leaks", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(broker::LeakReport report,
                          broker_.Leaks(session->id(), FromProto(*request)));
    ToProto(report, reply);
    return absl::OkStatus();
  });
}

}  // namespace memd::service
