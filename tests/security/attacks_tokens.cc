// Attack steps with session tokens that are not the caller's.

#include <cstdio>
#include <string>

#include "common/paths.h"
#include "grpcpp/grpcpp.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/security/attacks.h"

namespace memd::hostile {

MEMD_ATTACK(call_with_token,
            "TOKEN NAME: calls Stat(NAME) on a connection of its own with "
            "someone else's session TOKEN; prints the status code number and "
            "message") {
  if (args.size() != 2) return 2;
  auto stub = v1::Memd::NewStub(grpc::CreateChannel(
      "unix:" + ControlSocketPath(SocketDir()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("memd-session", args[0]);
  v1::StatRequest request;
  request.set_name(args[1]);
  v1::BufferInfo reply;
  grpc::Status status = stub->Stat(&context, request, &reply);
  std::printf("%d %s\n", static_cast<int>(status.error_code()),
              status.error_message().c_str());
  return 0;
}

}  // namespace memd::hostile
