// Attack steps on sessions: many of them, and calls made with them.

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

// Blocks until the test closes our stdin (or kills us).
void WaitForStdinToClose() {
  char byte;
  while (::read(0, &byte, 1) > 0) {
  }
}

}  // namespace

MEMD_ATTACK(hold_sessions,
            "N: opens N raw sessions that never read their socket; prints "
            "'held K' (K opened) and the first refusal, then holds them until "
            "stdin closes") {
  if (args.size() != 1) return 2;
  const int wanted = std::stoi(args[0]);
  std::vector<testing::RawSession> held;
  std::string refusal;
  for (int i = 0; i < wanted; ++i) {
    auto session = testing::RawSession::Connect(SocketDir());
    if (!session.ok()) {
      refusal = session.status().ToString();
      break;
    }
    held.push_back(std::move(*session));
  }
  std::printf("held %zu\n%s\n", held.size(), refusal.c_str());
  std::fflush(stdout);
  WaitForStdinToClose();
  return 0;
}

}  // namespace memd::hostile
