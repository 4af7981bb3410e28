// Steps against a memd that just took back a previous memd's buffers
// (durable recovery, docs/security.md "Recovery: what a restart must not
// give away"): re-claiming an adopted buffer during the grace period.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "memd/client.h"
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

}  // namespace memd::hostile
