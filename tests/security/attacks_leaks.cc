// Attack steps on the leak report (issue 26): reading others' leaks, and
// making the daemon answer with more than its cap. Each prints what the
// report gave it.

#include <cstdio>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {

MEMD_ATTACK(leak_report,
            "NAME LEASES WORD: publishes NAME, opens it LEASES times (holding the "
            "leases), then asks for every leak (older_than 0, many_leases 1); prints "
            "'leaks N omitted M', 'uids U,...' and 'naming WORD K' (subjects or "
            "evidence that contain WORD)") {
  if (args.size() != 3) return 2;
  const int leases = std::stoi(args[1]);
  auto session = StepSession();
  if (!session) return 1;
  if (grpc::Status made = CreateSealed(*session, args[0], 1, 0600); !made.ok()) {
    std::fprintf(stderr, "Create: %s\n", Refusal(made).c_str());
    return 1;
  }
  RawCalls calls(*session);
  for (int i = 0; i < leases; ++i) {
    v1::Lease lease;
    if (grpc::Status opened = calls.Open(args[0], v1::READ, &lease); !opened.ok()) {
      std::fprintf(stderr, "Open %d: %s\n", i, Refusal(opened).c_str());
      return 1;
    }
  }
  v1::LeaksRequest request;
  request.set_older_than_seconds(0);
  request.set_many_leases(1);
  v1::LeaksReply reply;
  if (grpc::Status status = session->Call(&v1::Memd::Stub::Leaks, request, &reply);
      !status.ok()) {
    std::printf("leaks %s\n", Refusal(status).c_str());
    return 0;
  }
  std::set<std::uint32_t> uids;
  int naming = 0;
  for (const v1::Leak& leak : reply.leaks()) {
    uids.insert(leak.uid());
    if (absl::StrContains(leak.subject(), args[2]) ||
        absl::StrContains(leak.evidence(), args[2])) {
      ++naming;
    }
  }
  std::printf("leaks %d omitted %llu\nuids %s\nnaming %s %d\n", reply.leaks_size(),
              static_cast<unsigned long long>(reply.omitted()),
              absl::StrJoin(uids, ",").c_str(), args[2].c_str(), naming);
  return 0;
}

}  // namespace memd::hostile
