#pragma once

// memctl's command line (CLI11): subcommands, options, help with examples,
// and the checks that make a bad command line exit 2 before anything
// touches the daemon.

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"

#include "tools/memctl/commands.h"

namespace CLI {
class App;
}

namespace memd::memctl {

enum class Command {
  kStats, kList, kInspect, kSessions, kUsage, kPut, kGet, kUnlink, kPing, kTrim,
  kDevices, kCopy, kAdvise, kPrefetch, kDrop, kLeaks, kTransfers
};

// What the command line asked for.
struct Invocation {
  std::string socket_dir;  // Empty: the client's default.
  bool json = false;
  Command command = Command::kStats;
  std::string name;    // inspect, prefetch, drop.
  std::string prefix;  // ls, advise.
  bool hide_unlinked = false;  // ls --no-unlinked.
  UnlinkOptions unlink;  // unlink NAME..., -r, --yes (confirm set by main).
  std::string location;  // trim, prefetch, drop.
  bool yes = false;  // unlink --yes: no question before -r.
  absl::Duration wait = absl::ZeroDuration();  // prefetch --wait.
  absl::Duration wait_for_memory = absl::ZeroDuration();  // prefetch --wait-for-memory.
  // stats --watch: redraw every `watch` (zero: once); --count frames
  // (zero: until interrupted).
  absl::Duration watch = absl::ZeroDuration();
  int count = 0;
  LeaksOptions leaks;  // leaks --older-than, --many-leases.
  PutOptions put;
  GetOptions get;
  CopyCommandOptions copy;
};

// Parses argv into `invocation`. Returns an exit code when memctl should
// stop without running a command: kExitOk after printing --help/--version
// to `out`, kExitUsage after reporting a usage error on `err`.
std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err);

// memctl's command line as ParseCommandLine declares it, with what its
// options fill, never parsed: what tools/clidoc walks for memctl's man page
// and shell completions.
std::unique_ptr<CLI::App> MakeCommandLineApp();

}  // namespace memd::memctl
