// Attack steps on sessions and connections: many of them, each leaving
// what memd sends unread.

#include <poll.h>
#include <sys/socket.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#define MEMD_HOSTILE_SIDE_ONLY
#include "tests/security/attacks.h"
#include "tests/security/held_attack.h"
#include "absl/time/clock.h"
#include "common/paths.h"
#include "common/unix_socket.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {

MEMD_ATTACK(flood_unread,
            "NAME SESSIONS OPENS GATE: opens up to SESSIONS raw sessions that "
            "never read their socket and in each opens NAME (read) up to OPENS "
            "times, every grant sending a descriptor; reports 'sessions K "
            "granted G' and then 'session|open CODE COUNT: first message' per "
            "kind and code of refusal at GATE, then holds them") {
  if (args.size() != 4) return 2;
  const int sessions = std::stoi(args[1]);
  const int opens = std::stoi(args[2]);
  std::vector<test::RawSession> held;
  std::uint64_t granted = 0;
  // (what, code) -> count, first message.
  std::map<std::pair<std::string, int>, std::pair<int, std::string>> refused;
  auto refuse = [&](const std::string& what, int code, const std::string& message) {
    auto& [count, first] = refused[{what, code}];
    if (count++ == 0) first = message;
  };
  for (int s = 0; s < sessions; ++s) {
    auto session = test::RawSession::Connect(SocketDir());
    if (!session.ok()) {
      refuse("session", static_cast<int>(session.status().code()),
             std::string(session.status().message()));
      continue;
    }
    for (int i = 0; i < opens; ++i) {
      v1::OpenRequest request;
      request.set_name(args[0]);
      v1::Lease lease;
      grpc::Status status = session->Call(&v1::Memd::Stub::Open, request, &lease);
      if (status.ok()) {
        ++granted;
        continue;
      }
      refuse("open", static_cast<int>(status.error_code()), status.error_message());
      break;  // This session is done; the next may still be served.
    }
    held.push_back(std::move(*session));
  }
  std::string report = absl::StrCat("sessions ", held.size(), " granted ", granted, "\n");
  for (const auto& [kind, entry] : refused) {
    absl::StrAppend(&report, kind.first, " ", kind.second, " ", entry.first, ": ",
                    entry.second, "\n");
  }
  return test::HoldAtGate(args[3], report) ? 0 : 1;
}

MEMD_ATTACK(flood_connections,
            "N KEEP GATE: opens N connections to the control socket and sends "
            "nothing; waits (up to 10 s) until at most KEEP are still open; "
            "reports 'connected C open K' at GATE, then holds them") {
  if (args.size() != 3) return 2;
  const int wanted = std::stoi(args[0]);
  const std::size_t keep = std::stoul(args[1]);
  std::vector<UniqueFd> connections;
  for (int i = 0; i < wanted; ++i) {
    auto connection = ConnectUnix(ControlSocketPath(SocketDir()), SOCK_STREAM);
    if (!connection.ok()) break;
    connections.push_back(std::move(*connection));
  }
  const std::size_t connected = connections.size();
  // memd closes the ones it refuses: wait for those hang-ups.
  std::vector<pollfd> open;
  for (const UniqueFd& fd : connections) open.push_back({fd.get(), POLLRDHUP, 0});
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (open.size() > keep) {
    const int left =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0 || ::poll(open.data(), open.size(), left) <= 0) break;
    std::erase_if(open, [](const pollfd& fd) {
      return (fd.revents & (POLLHUP | POLLRDHUP)) != 0;
    });
  }
  return test::HoldAtGate(args[2], absl::StrCat("connected ", connected, " open ",
                                                   open.size(), "\n"))
             ? 0
             : 1;
}

}  // namespace memd::hostile
