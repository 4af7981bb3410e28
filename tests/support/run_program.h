#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memd::test {

struct ProgramResult {
  int exit_code = -1;     // -1 when killed by a signal or timed out.
  int signal = 0;         // The signal that ended it, if any.
  std::string out;
  std::string err;
};

// The directory the build puts programs in (build/bin), or $MEMD_BIN_DIR
// where set (a bundle made by tools/gpu-bundle, run on another machine).
std::string BinDir();

// Runs `program` (a path) with `args`, feeding `input` to its stdin, with
// `env` added to (or overriding) this process's environment. Kills it after
// `timeout`, appending to `err` every thread's stack of it first (from gdb,
// where the machine has it), so that a hang says where it hung.
ProgramResult RunProgram(const std::string& program,
                         const std::vector<std::string>& args,
                         const std::string& input = "",
                         const std::map<std::string, std::string>& env = {},
                         absl::Duration timeout = absl::Seconds(30));

// Runs `program` with a terminal (a pseudo-terminal) as its stdin, stdout
// and stderr, `env` added to its environment, and `typed` typed at that
// terminal (a line such as "y\n", which it reads when it asks); `out` is
// everything it wrote there, the echo of what was typed included; `err`
// stays empty. No timeout: for programs that end by themselves.
ProgramResult RunOnATerminal(const std::string& program,
                             const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env = {},
                             const std::string& typed = "");

// Every thread's stack of process `pid` (gdb's, where the machine has it),
// for the message about a child that hangs.
std::string StacksOf(pid_t pid);

// What child `pid` writes first on `fd` (a pipe), within `timeout`: its
// bytes ("" at end of file). A child that says nothing in time is
// DEADLINE_EXCEEDED with its stacks in the message, so that a hang in CI
// says where; the child is left as it is (the caller kills it).
absl::StatusOr<std::string> ReadFromChild(int fd, pid_t pid,
                                          absl::Duration timeout = absl::Seconds(60));

// This process's environment with `overrides` added or replacing entries, as
// "NAME=value" strings. Built before fork: the child of a threaded process
// may not allocate until it execs (a setenv there deadlocked on a lock
// another thread held at the fork; seen under ASan in CI).
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& overrides);

// `strings` as the null-terminated array execve takes; they must outlive it.
std::vector<char*> ExecArray(std::vector<std::string>& strings);

// Everything about a run, for failure messages: exit status, signal, the
// first 2000 bytes of stdout and all of stderr.
std::string Describe(const ProgramResult& result);

}  // namespace memd::test
