// Issue 26: the leak report tells what a uid holds and how long it has been
// idle. Another uid must learn none of it, and no client can make the
// daemon format and send more than the report's cap.

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
#include "tests/support/poll_until.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::kAlice;
using ::memd::test::kMallory;
using ::memd::test::PollUntil;
using ::memd::test::ProgramResult;
using ::testing::HasSubstr;

class LeakReportAttackTest : public test::OpenDaemonTest {
 protected:
  // Root's report of everything, however young.
  LeakReport Everything() {
    auto root = Client::Connect({.socket_dir = config_.socket_dir});
    EXPECT_TRUE(root.ok()) << root.status();
    if (!root.ok()) return {};
    auto report = (*root)->Leaks({.older_than = absl::ZeroDuration(), .many_leases = 1});
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : LeakReport{};
  }
};

TEST_F(LeakReportAttackTest, AnotherUidSeesNoneOfAUidsLeaks) {
  StartDaemon();
  ProgramResult alice = Hostile(kAlice, {"publish_text", "alice/forgotten", "mine", "644"});
  ASSERT_EQ(alice.out, "published\n") << Describe(alice);
  // Root sees Alice's never-opened buffer: there is something to hide.
  bool listed = false;
  for (const Leak& leak : Everything().leaks) {
    listed = listed || (leak.subject == "alice/forgotten" && leak.uid == kAlice);
  }
  ASSERT_TRUE(listed);

  ProgramResult mallory = Hostile(kMallory, {"leak_report", "mallory/bait", "2", "alice"});
  ASSERT_EQ(mallory.exit_code, 0) << Describe(mallory);
  // Its own: the bait's two leases and its session; nothing of Alice's.
  EXPECT_EQ(mallory.out, absl::StrCat("leaks 3 omitted 0\nuids ", kMallory,
                                      "\nnaming alice 0\n"));
}

TEST_F(LeakReportAttackTest, NoClientGetsMoreThanTheCapWhateverItHolds) {
  StartDaemon();
  // 4101 leases and a session holding them: 4102 leaks, 4096 sent.
  ProgramResult mallory = Hostile(kMallory, {"leak_report", "mallory/bait", "4101", "alice"});
  ASSERT_EQ(mallory.exit_code, 0) << Describe(mallory);
  EXPECT_EQ(mallory.out,
            absl::StrCat("leaks 4096 omitted 6\nuids ", kMallory, "\nnaming alice 0\n"));
  // Its leases go with its session: soon nothing of it is left to report.
  // The daemon releases them after Mallory's process exits, so ask again.
  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  size_t left = 0;
  EXPECT_TRUE(PollUntil([&] {
    auto report =
        (*root)->Leaks({.older_than = absl::ZeroDuration(), .many_leases = 1});
    left = report.ok() ? report->leaks.size() + report->omitted : ~size_t{0};
    return left == 0;
  })) << left << " leaks left";
}

}  // namespace
}  // namespace memd
