#include "tests/support/run_program.h"

#include <signal.h>
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

}  // namespace
}  // namespace memd::test
