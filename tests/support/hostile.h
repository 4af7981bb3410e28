#pragma once

// Hostile clients, so that the next attack on memd is a few lines to write.
//
// - RawSession (raw_session.h): a session opened by hand, for raw gRPC calls
//   libmemd would never make.
// - ForkAs: a forked child that drops to another uid and runs a body that
//   uses no gRPC (the parent's gRPC threads do not survive fork): raw
//   sockets, descriptors, system calls.
// - RunHostile: build/bin/memd-hostile as another uid, for attacks that need
//   gRPC (a fresh process); its commands live in tests/security/attacks_*.cc.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/run_program.h"

namespace memd::test {

// Users that exist only as numbers: no passwd entry is needed to run as
// them, and nothing else on the machine runs as them.
inline constexpr uid_t kAlice = 61001;
inline constexpr uid_t kBob = 61002;
inline constexpr uid_t kMallory = 61003;  // The attacker.
// Each user's own group has the user's number.

// Becomes `uid`/`gid` with no supplementary groups (root's groups must not
// leak into the attacker). Returns false when any step fails.
bool DropPrivileges(uid_t uid, gid_t gid);

struct ChildResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out.
  int signal = 0;
  std::string out;  // What the body wrote to its `out` descriptor.
};

// Forks; the child drops to `uid`/`gid` (exit 120 if it cannot), runs
// `body(out)` and exits with its return value. `out` is a pipe back to the
// parent. The child is killed after `timeout`. The body must not use gRPC.
ChildResult ForkAs(uid_t uid, gid_t gid, const std::function<int(int out)>& body,
                   absl::Duration timeout = absl::Seconds(30));

// Runs build/bin/memd-hostile as `uid` (group `uid`) against the daemon on
// `socket_dir`: `memd-hostile COMMAND ARGS...`.
ProgramResult RunHostile(uid_t uid, const std::string& socket_dir,
                         const std::vector<std::string>& args,
                         const std::string& input = "",
                         absl::Duration timeout = absl::Seconds(30));

// Lets every user reach sockets under `dir`: adds search permission (o+x)
// to `dir` and each of its ancestors that lacks it (TempDir makes 0700
// directories). The daemon must also run with socket_mode 0666.
void LetOthersTraverse(const std::string& dir);

// Makes `dir` like /tmp (mode 01777: everyone may add entries, nobody may
// remove another's) and reachable by every user. Returns false on failure.
bool MakeStickyDir(const std::string& dir);

// Writes all of `text` to `fd`, for bodies of ForkAs.
void WriteAll(int fd, const std::string& text);

}  // namespace memd::test
