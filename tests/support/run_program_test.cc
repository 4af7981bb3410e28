#include "tests/support/run_program.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::test {
namespace {

using ::testing::HasSubstr;

TEST(RunProgramTest, FeedsStdinAndReturnsOutputAndExitCode) {
  ProgramResult result = RunProgram("/bin/sh", {"-c", "cat; echo oops >&2; exit 3"}, "bytes");
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.signal, 0);
  EXPECT_EQ(result.out, "bytes");
  EXPECT_EQ(result.err, "oops\n");
}

// A program that hangs is killed at its timeout, and says where it hung:
// in CI a hang is otherwise only "signal 9" and empty output.
TEST(RunProgramTest, AProgramPastItsTimeoutIsKilledAndItsStacksShown) {
  ProgramResult result = RunProgram("/bin/sleep", {"600"}, "", {}, absl::Seconds(1));
  EXPECT_EQ(result.exit_code, -1);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_THAT(result.err, HasSubstr("it outlived its 1s; its threads' stacks before SIGKILL"));
  if (::access("/usr/bin/gdb", X_OK) != 0) GTEST_SKIP() << "no gdb: no stacks to check";
  // gdb numbers the frames of the one thread sleep has.
  EXPECT_THAT(result.err, HasSubstr("#0 ")) << result.err;
  EXPECT_THAT(result.err, HasSubstr("sleep")) << result.err;
}

// A forked child's first words, or where it hangs.
TEST(RunProgramTest, ReadFromChildGivesItsWordsOrItsStacks) {
  for (const bool speaks : {true, false}) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::dup2(pipe_fds[1], 1);
      ::execl("/bin/sh", "/bin/sh", "-c", speaks ? "echo held; exec sleep 600" : "exec sleep 600",
              nullptr);
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    absl::StatusOr<std::string> said = ReadFromChild(pipe_fds[0], child, absl::Seconds(1));
    ::close(pipe_fds[0]);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    if (speaks) {
      ASSERT_TRUE(said.ok()) << said.status();
      EXPECT_EQ(*said, "held\n");
      continue;
    }
    ASSERT_EQ(said.status().code(), absl::StatusCode::kDeadlineExceeded) << said.status();
    EXPECT_THAT(std::string(said.status().message()), HasSubstr("said nothing within 1s"));
    if (::access("/usr/bin/gdb", X_OK) == 0) {
      EXPECT_THAT(std::string(said.status().message()), HasSubstr("#0 "));
    }
  }
}

}  // namespace
}  // namespace memd::test
