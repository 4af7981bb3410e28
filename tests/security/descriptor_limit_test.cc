// Finding 8 (issue 22): under RLIMIT_NOFILE 128 memd lowered max_sessions
// to 1 (each session reserved 33 descriptors and the 1024 control
// connections of max_connections stayed reserved), so one uid's idle
// session locked every other uid out. Now the sessions, the control
// connections, the descriptors in flight per session and the per-uid shares
// are all sized from the limit so that at least kMinUidsServed uids are
// served, and below kMinDescriptorLimit memd refuses to start.

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/descriptor_budget.h"
#include "gmock/gmock.h"
#include "memd/client.h"
#include "tests/security/held_attack.h"
#include "tests/support/daemon_process.h"
#include "tests/support/hostile.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using test::DaemonProcess;
using test::Describe;

constexpr uid_t kDaemonUser = 61010;  // memd runs unprivileged, like its unit.

class DescriptorLimitTest : public ::testing::Test {
 protected:
  DescriptorLimitTest() {
    ::setenv("MEMD_DAEMON_UID", absl::StrCat(kDaemonUser).c_str(), 1);
  }
  ~DescriptorLimitTest() override { ::unsetenv("MEMD_DAEMON_UID"); }
};

TEST_F(DescriptorLimitTest, UnderALimitOf128OneUidCannotLockTheOthersOut) {
  // Nearly the defaults (4000 sessions the operator chose, 1024
  // connections, 32 in flight) and a small limit, as in a container that
  // keeps the hard limit low: a cap the operator chose was lowered, so each
  // cap lowered is a warning.
  auto daemon = DaemonProcess::StartAs({.uid = kDaemonUser, .descriptor_limit = 128},
                                       {"--backend", "host", "--socket-mode", "0666",
                                        "--max-sessions", "4000"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string dir = (*daemon)->socket_dir();
  const std::string log = (*daemon)->Log();
  EXPECT_THAT(log, HasSubstr("warning descriptor budget: max_sessions lowered from 4000 to 8"));
  EXPECT_THAT(log, HasSubstr("warning descriptor budget: max_sessions_per_uid lowered from 256 to 2"));
  EXPECT_THAT(log, HasSubstr("warning descriptor budget: max_connections lowered from 1024 to 56"));

  // Mallory holds every session she may, and floods the control socket.
  test::HeldAttack sessions(test::kMallory, dir, {"fill_sessions"}, dir + "/../sessions");
  const std::string report = sessions.Report();
  EXPECT_THAT(report, StartsWith("sessions 2\n")) << report;
  EXPECT_THAT(report, HasSubstr("(max_sessions_per_uid)")) << report;
  test::HeldAttack flood(test::kMallory, dir, {"flood_connections", "200", "14"},
                         dir + "/../flood");
  EXPECT_THAT(flood.Report(), HasSubstr("connected 200 open 14\n"));

  // Alice, Bob and root are served meanwhile: each a session and a
  // control connection.
  test::ProgramResult published = test::RunHostile(
      test::kAlice, dir, {"publish_text", "alice/0", "still served", "644"});
  EXPECT_EQ(published.exit_code, 0) << Describe(published);
  test::ProgramResult read = test::RunHostile(test::kBob, dir, {"read_text", "alice/0", "0"});
  EXPECT_EQ(read.out, "read: still served\n") << Describe(read);
  auto root = Client::Connect({.socket_dir = dir});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE((*root)->Ping().ok());
  EXPECT_EQ(sessions.Release().exit_code, 0) << Describe(sessions.Release());
  EXPECT_EQ(flood.Release().exit_code, 0) << Describe(flood.Release());
}

TEST_F(DescriptorLimitTest, BelowTheMinimumMemdRefusesToStartWithTheNumbers) {
  auto daemon = DaemonProcess::StartAs(
      {.uid = kDaemonUser, .descriptor_limit = kMinDescriptorLimit - 16},
      {"--backend", "host", "--socket-mode", "0666"});
  ASSERT_FALSE(daemon.ok()) << "memd started with RLIMIT_NOFILE "
                            << kMinDescriptorLimit - 16;
  EXPECT_THAT(std::string(daemon.status().message()),
              AllOf(HasSubstr("exit status 1"), HasSubstr("cannot start: FAILED_PRECONDITION"),
                    HasSubstr(absl::StrCat("RLIMIT_NOFILE is ", kMinDescriptorLimit - 16)),
                    HasSubstr(absl::StrCat("at least ", kMinDescriptorLimit)),
                    HasSubstr("LimitNOFILE=")));
}

}  // namespace
}  // namespace memd
