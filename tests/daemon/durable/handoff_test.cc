// An upgrade's hand-off (daemon/durable/handoff.h): ExecWithFds hands
// descriptors on at their own numbers and touches no other, and
// TakeHandedOffFds takes only a table ExecWithFds would have written.

#include "daemon/durable/handoff.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/unique_fd.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"

namespace memd::durable {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Service() { return test::BinDir() + "/memd-fd-store-service"; }

UniqueFd Memfd(const std::string& text, unsigned flags = MFD_CLOEXEC) {
  UniqueFd fd(::memfd_create("handoff-test", flags));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

std::size_t OpenDescriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

// Puts a table with `text` in the environment as ExecWithFds would for this
// process (or `pid`); returns the table's descriptor.
UniqueFd HandOffTable(const std::string& text, bool seal = true, pid_t pid = ::getpid()) {
  UniqueFd table = Memfd(text, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (seal) {
    EXPECT_EQ(::fcntl(table.get(), F_ADD_SEALS,
                      F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE),
              0);
  }
  ::setenv(kHandOffFdVariable, absl::StrCat(table.get()).c_str(), 1);
  ::setenv(kHandOffPidVariable, absl::StrCat(pid).c_str(), 1);
  return table;
}

TEST(HandOffTest, ExecWithFdsHandsDescriptorsOnAtTheirNumbersAndNoneElse) {
  // The stand-in passes a at 40 and b at 41 and keeps a CLOEXEC bystander
  // at 3: LISTEN_FDS would have moved a onto 3, closing whatever owned it.
  const test::ProgramResult result = test::RunProgram(Service(), {"exec", "print"});
  ASSERT_EQ(result.exit_code, 0) << test::Describe(result);
  EXPECT_EQ(result.out, "a@40=alpha\nb@41=beta\n3 closed\n");
}

TEST(HandOffTest, ExecWithFdsUnderTheManagerKeepsTheMainPid) {
  auto manager = test::ServiceManager::Create({.fd_store_max = 16});
  ASSERT_TRUE(manager.ok()) << manager.status();
  ASSERT_TRUE((*manager)->Start(Service(), {"store=x=1", "store=y=2", "ready", "pause"}).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok());
  ASSERT_TRUE((*manager)->Kill(SIGKILL).ok());
  ASSERT_TRUE((*manager)->Wait().ok());
  // The new start takes x, y and hands them on reversed to its new image,
  // whose messages the manager still accepts: same pid.
  ASSERT_TRUE((*manager)->Start(Service(), {"exec", "listen", "ready", "pause"}).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok());
  const auto statuses = (*manager)->Current().statuses;
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.back(), "listened y=2 x=1 ");
}

TEST(HandOffTest, ExecWithFdsThatFailsLeavesEveryDescriptorAsItWas) {
  UniqueFd a = Memfd("a"), b = Memfd("b");
  const std::size_t open_before = OpenDescriptors();
  const PassedFd fds[] = {{"a", a.get()}, {"b", b.get()}};
  const absl::Status status = ExecWithFds("/nonexistent/memd", {"memd"}, fds);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_EQ(::fcntl(a.get(), F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(::fcntl(b.get(), F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(OpenDescriptors(), open_before);  // The table is gone too.
  EXPECT_EQ(std::getenv(kHandOffFdVariable), nullptr);
}

TEST(HandOffTest, ExecWithFdsRefusesWhatItCannotHandOnBeforeChangingAnything) {
  UniqueFd a = Memfd("a");
  const PassedFd twice[] = {{"a", a.get()}, {"again", a.get()}};
  EXPECT_EQ(ExecWithFds(Service(), {"x"}, twice).code(), absl::StatusCode::kInvalidArgument);
  const PassedFd closed[] = {{"a", a.get()}, {"gone", 999}};
  const absl::Status refused = ExecWithFds(Service(), {"x"}, closed);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("999 (gone) is not open"));
  const PassedFd bad_name[] = {{"a:b", a.get()}};
  EXPECT_EQ(ExecWithFds(Service(), {"x"}, bad_name).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecWithFds(Service(), {}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(::fcntl(a.get(), F_GETFD), FD_CLOEXEC);
}

TEST(HandOffTest, TakeHandedOffFdsTakesTheTableInOrderAndUnsetsIt) {
  UniqueFd a = Memfd("a"), b = Memfd("b");
  ::fcntl(a.get(), F_SETFD, 0);
  ::fcntl(b.get(), F_SETFD, 0);
  const int table = HandOffTable(absl::StrCat(b.get(), " memd.state.7\n", a.get(),
                                              " memd.segment.1 with spaces\n"))
                        .release();
  auto taken = TakeHandedOffFds();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].name, "memd.state.7");
  EXPECT_EQ((*taken)[0].fd.get(), b.get());
  EXPECT_EQ((*taken)[1].name, "memd.segment.1 with spaces");
  EXPECT_EQ((*taken)[1].fd.get(), a.get());
  EXPECT_EQ(::fcntl(a.get(), F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(::fcntl(table, F_GETFD), -1);  // Closed once read.
  EXPECT_EQ(std::getenv(kHandOffFdVariable), nullptr);
  EXPECT_EQ(std::getenv(kHandOffPidVariable), nullptr);
  // Taken now: the UniqueFds in `taken` own them.
  (void)a.release();
  (void)b.release();
}

TEST(HandOffTest, ATableMeantForAnotherProcessIsLeftAlone) {
  UniqueFd a = Memfd("a");
  ::fcntl(a.get(), F_SETFD, 0);
  UniqueFd table = HandOffTable(absl::StrCat(a.get(), " x\n"), true, ::getppid());
  auto taken = TakeHandedOffFds();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_THAT(*taken, IsEmpty());
  EXPECT_EQ(::fcntl(a.get(), F_GETFD), 0);  // Untouched.
  EXPECT_GE(::fcntl(table.get(), F_GETFD), 0);
  EXPECT_EQ(std::getenv(kHandOffFdVariable), nullptr);
}

TEST(HandOffTest, ATableExecWithFdsWouldNotWriteTakesNothing) {
  UniqueFd a = Memfd("a");
  ::fcntl(a.get(), F_SETFD, 0);
  const std::string fd_a = absl::StrCat(a.get());
  struct Case {
    std::string text;
    bool seal;
    std::string why;
  };
  const std::vector<Case> cases = {
      {fd_a + " x\n", false, "not a sealed table"},
      {"2 stderr\n", true, "line 1"},
      {fd_a + " x\n" + fd_a + " y\n", true, "line 2"},
      {"999 gone\n", true, "line 1"},
      {fd_a + " bad:name\n", true, "line 1"},
      {fd_a + "\n", true, "line 1"},
      {"seven x\n", true, "line 1"},
  };
  for (const Case& c : cases) {
    UniqueFd table = HandOffTable(c.text, c.seal);
    auto taken = TakeHandedOffFds();
    EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(taken.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_EQ(::fcntl(a.get(), F_GETFD), 0) << c.text;  // All or nothing.
  }
  // A table listing itself.
  UniqueFd self(::memfd_create("handoff-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  const std::string itself = absl::StrCat(self.get(), " itself\n");
  ASSERT_EQ(::write(self.get(), itself.data(), itself.size()),
            static_cast<ssize_t>(itself.size()));
  ASSERT_EQ(::fcntl(self.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW |
                                                 F_SEAL_WRITE),
            0);
  ::setenv(kHandOffFdVariable, absl::StrCat(self.get()).c_str(), 1);
  ::setenv(kHandOffPidVariable, absl::StrCat(::getpid()).c_str(), 1);
  auto listed_itself = TakeHandedOffFds();
  EXPECT_EQ(listed_itself.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(listed_itself.status().message(), HasSubstr("line 1"));
  // A table below 3.
  ::setenv(kHandOffFdVariable, "1", 1);
  ::setenv(kHandOffPidVariable, absl::StrCat(::getpid()).c_str(), 1);
  EXPECT_EQ(TakeHandedOffFds().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memd::durable
