// Steps against a memd that just took back a previous memd's buffers
// (durable recovery, docs/security.md "Recovery: what a restart must not
// give away"): re-claiming an adopted buffer during the grace period.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "memd/client.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"

namespace memd::hostile {

MEMD_ATTACK(claim,
            "NAME: opens NAME read-write if it is unsealed, else read-only (a "
            "lease that keeps an adopted buffer past the grace period); prints "
            "the status code, then 'held' and waits to be killed if OK") {
  if (args.size() != 1) return 2;
  ConnectOptions options;
  options.socket_dir = SocketDir();
  auto client = Client::Connect(options);
  if (!client.ok()) {
    std::printf("%s\n", absl::StatusCodeToString(client.status().code()).c_str());
    return 1;
  }
  OpenOptions join;
  join.access = Access::kReadWrite;
  auto buffer = (*client)->Open(args[0], join);
  if (buffer.status().code() == absl::StatusCode::kFailedPrecondition) {
    buffer = (*client)->Open(args[0]);  // Sealed: a reader's lease.
  }
  std::printf("%s\n", absl::StatusCodeToString(buffer.status().code()).c_str());
  if (!buffer.ok()) return 1;
  std::printf("held\n");
  std::fflush(stdout);
  for (;;) ::pause();
}

MEMD_ATTACK(reclaim,
            "TOKEN LEASE...: re-claims the LEASEs with someone else's (leaked) "
            "session TOKEN in a raw session of its own; prints 'reclaimed N' and "
            "the refusals' status code names") {
  if (args.size() < 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  v1::ReclaimRequest request;
  request.set_previous_token(args[0]);
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::uint64_t id = 0;
    if (!absl::SimpleAtoi(args[i], &id)) return 2;
    request.add_lease_ids(id);
  }
  v1::ReclaimReply reply;
  const grpc::Status status = session->Call(&v1::Memd::Stub::Reclaim, request, &reply);
  if (!status.ok()) {
    std::printf("%s\n", Refusal(status).c_str());
    return 1;
  }
  std::printf("reclaimed %d", reply.reclaimed_size());
  for (const v1::LeaseRefusal& refused : reply.refused()) {
    std::printf(" %s",
                absl::StatusCodeToString(static_cast<absl::StatusCode>(refused.code())).c_str());
  }
  std::printf("\n");
  return 0;
}

}  // namespace memd::hostile
