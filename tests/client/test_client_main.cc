// memd-test-client: a client process for multi-process tests. Each command
// does one thing through libmemd and reports on stdout / its exit code.
//
//   memd-test-client [--uid N] produce NAME SIZE SEED [MODE]
//       create a persistent buffer, fill it with Pattern(SEED), seal, exit
//   memd-test-client [--uid N] consume NAME SIZE SEED [WAIT_MS]
//       open (waiting up to WAIT_MS), check the pattern; exit 0 if it matches
//   memd-test-client [--uid N] open NAME
//       open read-only; print the status code name (OK, PERMISSION_DENIED...)
//   memd-test-client [--uid N] unlink NAME
//   memd-test-client [--uid N] trim LOCATION|all
//   memd-test-client hold NAME...
//       open each name, create an ephemeral "NAME.mine" for the first,
//       print "held" and wait to be killed
//
// --uid switches to that uid (and gid) before connecting: root only.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "memd/client.h"
#include "tests/client/pattern.h"

namespace {

int Fail(const absl::Status& status) {
  std::printf("%s\n", absl::StatusCodeToString(status.code()).c_str());
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 2 && args[0] == "--uid") {
    int uid = std::atoi(args[1].c_str());
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) {
      std::perror("setuid");
      return 3;
    }
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: see the comment in test_client_main.cc\n");
    return 2;
  }
  auto client = memd::Client::Connect();
  if (!client.ok()) return Fail(client.status());
  const std::string& command = args[0];
  const std::string& name = args[1];

  if (command == "produce" && args.size() >= 4) {
    memd::CreateOptions options;
    if (args.size() >= 5) options.mode = std::stoul(args[4], nullptr, 8);
    auto buffer = (*client)->Create(name, std::stoull(args[2]), options);
    if (!buffer.ok()) return Fail(buffer.status());
    memd::testing::FillPattern(buffer->mutable_data(), std::stoul(args[3]));
    if (auto sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
    std::printf("OK\n");
    return 0;
  }
  if (command == "consume" && args.size() >= 4) {
    memd::OpenOptions options;
    if (args.size() >= 5) options.wait = absl::Milliseconds(std::stoll(args[4]));
    auto buffer = (*client)->Open(name, options);
    if (!buffer.ok()) return Fail(buffer.status());
    if (buffer->size() != std::stoull(args[2]) ||
        !memd::testing::MatchesPattern(buffer->data(), std::stoul(args[3]))) {
      std::printf("MISMATCH\n");
      return 4;
    }
    std::printf("OK\n");
    return 0;
  }
  if (command == "open") {
    auto buffer = (*client)->Open(name);
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("OK\n");
    return 0;
  }
  if (command == "trim") {
    auto trimmed = (*client)->Trim(name == "all" ? "" : name);
    if (!trimmed.ok()) return Fail(trimmed.status());
    std::printf("OK\n");
    return 0;
  }
  if (command == "unlink") {
    if (auto unlinked = (*client)->Unlink(name); !unlinked.ok()) return Fail(unlinked);
    std::printf("OK\n");
    return 0;
  }
  if (command == "hold") {
    std::vector<memd::Buffer> held;
    for (std::size_t i = 1; i < args.size(); ++i) {
      auto buffer = (*client)->Open(args[i]);
      if (!buffer.ok()) return Fail(buffer.status());
      held.push_back(std::move(*buffer));
    }
    auto mine = (*client)->Create(name + ".mine", 4096,
                                  {.persistence = memd::Persistence::kEphemeral});
    if (!mine.ok()) return Fail(mine.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  std::fprintf(stderr, "unknown command or missing arguments\n");
  return 2;
}
