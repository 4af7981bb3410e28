// Finding 3 (issue 9): descriptors memd sent that a client has not read
// count against a kernel limit of memd's user (RLIMIT_NOFILE; root is
// exempt, memd's service user is not). 250 sessions that never read their
// sockets made every other user's Create fail with "Too many references".
// Now a session may leave only max_fds_in_flight_per_session unread and a
// uid may hold only max_sessions_per_uid sessions, so the attacker's own
// calls are refused while everybody else is served.

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "memd/client.h"
#include "tests/security/held_attack.h"
#include "tests/support/daemon_process.h"
#include "tests/support/hostile.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::DaemonProcess;

constexpr uid_t kDaemonUser = 61010;  // memd runs unprivileged, like its unit.

TEST(FdsInFlightTest, SessionsThatNeverReadCostOnlyTheirOwnUser) {
  auto daemon = DaemonProcess::StartAs(
      {.uid = kDaemonUser, .descriptor_limit = 1024},
      {"--backend", "host", "--socket-mode", "0666", "--max-connections", "32",
       "--max-sessions-per-uid", "4", "--max-fds-in-flight-per-session", "32"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string dir = (*daemon)->socket_dir();
  ::setenv("MEMD_DAEMON_UID", absl::StrCat(kDaemonUser).c_str(), 1);

  test::ProgramResult shared = test::RunHostile(
      test::kAlice, dir, {"publish_text", "shared", "everyone reads this", "644"});
  ASSERT_EQ(shared.exit_code, 0) << test::Describe(shared);

  // Mallory: 250 sessions, each asking for 300 descriptors it never reads.
  test::HeldAttack flood(test::kMallory, dir,
                            {"flood_unread", "shared", "250", "300"},
                            (*daemon)->socket_dir() + "/../gate");
  const std::string report = flood.Report();
  // Her sessions stop at her cap, and each at the in-flight bound, with
  // the numbers.
  EXPECT_THAT(report, HasSubstr("sessions 4 granted 128\n")) << report;
  EXPECT_THAT(report, HasSubstr("open 8 4: could not pass the buffer's descriptor "
                                "to the client: session")) << report;
  EXPECT_THAT(report, HasSubstr("has 32 packets (descriptors, notices) it has not read")) << report;
  EXPECT_THAT(report, HasSubstr("session 8 246: ")) << report;
  EXPECT_THAT(report, HasSubstr("(max_sessions_per_uid)")) << report;

  // Meanwhile Alice and Bob create and open as if nothing happened.
  test::ProgramResult made = test::RunHostile(
      test::kAlice, dir, {"publish_text", "alice/0", "still served", "644"});
  EXPECT_EQ(made.exit_code, 0) << test::Describe(made);
  test::ProgramResult read =
      test::RunHostile(test::kBob, dir, {"read_text", "alice/0", "0"});
  EXPECT_EQ(read.exit_code, 0) << test::Describe(read);
  EXPECT_THAT(read.out, HasSubstr("read: still served"));
  EXPECT_EQ(flood.Release().exit_code, 0);
  ::unsetenv("MEMD_DAEMON_UID");
}

}  // namespace
}  // namespace memd
