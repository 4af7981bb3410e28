// memctl end to end, on who holds a buffer and how buffers go: inspect's
// lease holders, unlinked buffers still leased in ls, unlink of several names
// and of a prefix (-r), and all of it as another user.

#include "tests/tools/memctl_fixture.h"

namespace memd::memctl_test {
namespace {

TEST_F(MemctlTest, UnlinkThenGetFailsWithNotFound) {
  Put("gone", "bytes");
  ProgramResult unlink = Run({"unlink", "gone"});
  ASSERT_EQ(unlink.exit_code, 0) << Describe(unlink);
  EXPECT_THAT(unlink.out, HasSubstr("gone"));

  ExpectFailure(Run({"get", "gone"}), "get gone", "NOT_FOUND");
  ExpectFailure(Run({"inspect", "gone"}), "inspect gone", "NOT_FOUND");
  ExpectFailure(Run({"unlink", "gone", "--json"}), "unlink gone", "NOT_FOUND");
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

TEST_F(MemctlTest, UnlinkJsonReportsTheName) {
  Put("doomed", "x");
  Json json = RunJson({"--json", "unlink", "doomed"});
  EXPECT_EQ(json.at("name"), "doomed");
  EXPECT_EQ(json.at("unlinked"), true);
}

// Issue 29: inspect says who holds a buffer's leases, to root in full.
TEST_F(MemctlTest, InspectSaysWhoHoldsTheLeasesAsTableAndJson) {
  Put("held", "bytes");
  Holder reader = HoldLease("held");
  ASSERT_TRUE(reader.lease.has_value());

  ProgramResult inspect = Run({"inspect", "held"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, HasSubstr("\nheld by ")) << inspect.out;
  EXPECT_THAT(inspect.out, HasSubstr(absl::StrCat("session ", reader.client->session_id(),
                                                  ", pid ", ::getpid(), " (")));
  EXPECT_THAT(inspect.out, HasSubstr("(uid 0): 1 read lease at host since "));
  EXPECT_THAT(inspect.out, Not(HasSubstr("other users")));

  Json holders = RunJson({"inspect", "held", "--json"}).at("holders");
  ASSERT_EQ(holders.at("listed").size(), 1u) << holders.dump();
  const Json& holder = holders.at("listed")[0];
  EXPECT_EQ(holder.at("session_id"), reader.client->session_id());
  EXPECT_EQ(holder.at("pid"), ::getpid());
  EXPECT_EQ(holder.at("uid"), 0);
  EXPECT_EQ(holder.at("access"), "read");
  EXPECT_EQ(holder.at("location"), "host");
  EXPECT_EQ(holder.at("leases"), 1);
  EXPECT_EQ(holders.at("unlisted_leases"), 0);
  EXPECT_EQ(holders.at("other_users_leases"), 0);
  // A listing carries no holders: it is Stat's.
  EXPECT_TRUE(RunJson({"ls", "--json"})[0].at("holders").at("listed").empty());
}

// Issue 29: a buffer unlinked while leased keeps its memory; ls shows it,
// marked, so that nobody wonders where the memory went.
TEST_F(MemctlTest, LsShowsBuffersUnlinkedButStillLeased) {
  Put("job/a", "old bytes");
  Holder reader = HoldLease("job/a");
  ASSERT_TRUE(reader.lease.has_value());
  ASSERT_EQ(Run({"unlink", "job/a"}).exit_code, 0);
  Put("job/a", "new");

  ProgramResult ls = Run({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << Describe(ls);
  const std::vector<std::string> lines = absl::StrSplit(ls.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << ls.out;
  EXPECT_THAT(lines[1], AllOf(HasSubstr("job/a"), HasSubstr("sealed")));
  EXPECT_THAT(lines[2], AllOf(HasSubstr("job/a"), HasSubstr("9 B"),
                              HasSubstr("unlinked, 1 lease ")));
  EXPECT_THAT(lines[3], StartsWith("1 buffer was unlinked but still takes memory"));

  Json list = RunJson({"ls", "--json"});
  ASSERT_EQ(list.size(), 2u) << list.dump();
  EXPECT_EQ(list[0].at("unlinked"), false);
  EXPECT_EQ(list[1].at("unlinked"), true);
  EXPECT_EQ(list[1].at("lease_count"), 1);
  EXPECT_EQ(list[1].at("size_bytes"), 9);
  EXPECT_EQ(RunJson({"ls", "--json", "--no-unlinked"}).size(), 1u);

  ASSERT_TRUE(reader.lease->Release().ok());
  EXPECT_EQ(RunJson({"ls", "--json"}).size(), 1u) << "its memory went with its last lease";
}

TEST_F(MemctlTest, UnlinkOfSeveralNamesUnlinksEachAndReportsEachFailure) {
  for (const char* name : {"a", "b", "c"}) Put(name, "x");
  ProgramResult several = Run({"unlink", "a", "missing", "b"});
  EXPECT_EQ(several.exit_code, kExitFailed) << Describe(several);
  EXPECT_EQ(several.out, "unlinked a\nunlinked b\n");
  EXPECT_THAT(several.err,
              AllOf(HasSubstr("memctl: unlink missing: NOT_FOUND: no buffer named 'missing'\n"),
                    HasSubstr("memctl: unlink: NOT_FOUND: 1 of 3 names failed")));

  ProgramResult json = Run({"--json", "unlink", "c", "missing"});
  EXPECT_EQ(json.exit_code, kExitFailed) << Describe(json);
  Json outcomes = Json::parse(json.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(outcomes.is_array()) << json.out;
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].at("name"), "c");
  EXPECT_EQ(outcomes[0].at("unlinked"), true);
  EXPECT_FALSE(outcomes[0].contains("error"));
  EXPECT_EQ(outcomes[1].at("unlinked"), false);
  EXPECT_THAT(outcomes[1].at("error").get<std::string>(), StartsWith("NOT_FOUND: "));
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

// rm -i's question, made safe for scripts: -r lists and asks on a
// terminal; with no terminal to ask on it refuses unless --yes.
TEST_F(MemctlTest, UnlinkRecursiveRefusesWithoutATerminalUnlessTold) {
  for (const char* name : {"job42/a", "job42/b", "job420"}) Put(name, "x");
  ProgramResult refused = Run({"unlink", "-r", "job42/"});
  EXPECT_EQ(refused.exit_code, kExitUsage) << Describe(refused);
  EXPECT_THAT(refused.out, IsEmpty());
  EXPECT_THAT(refused.err, AllOf(HasSubstr("stdin is not a terminal"), HasSubstr("--yes")));
  EXPECT_EQ(Run({"unlink", "-r", "", "--yes"}).exit_code, kExitUsage) << "everything?";
  EXPECT_EQ(RunJson({"ls", "--json"}).size(), 3u) << "nothing went";

  ProgramResult told = Run({"unlink", "-r", "--yes", "job42/"});
  ASSERT_EQ(told.exit_code, 0) << Describe(told);
  EXPECT_EQ(told.out, "unlinked job42/a\nunlinked job42/b\n");
  Json left = RunJson({"ls", "--json"});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].at("name"), "job420");

  ProgramResult none = Run({"unlink", "-r", "-y", "job42/"});
  ExpectFailure(none, "unlink -r job42/", "NOT_FOUND");
}

TEST_F(MemctlTest, UnlinkRecursiveAsksOnATerminalAndOnlyYesGoesOn) {
  for (const char* name : {"job/a", "job/b"}) Put(name, "x");
  const std::vector<std::string> args = {"--socket-dir", daemon_->socket_dir(), "unlink", "-r",
                                         "job/"};
  ProgramResult declined = test::RunOnATerminal(Memctl(), args, {}, "n\n");
  EXPECT_EQ(declined.exit_code, kExitFailed) << Describe(declined);
  EXPECT_THAT(declined.out, AllOf(HasSubstr("  job/a\r\n  job/b\r\n"),
                                  HasSubstr("unlink 2 buffers under job/? [y/N] "),
                                  HasSubstr("CANCELLED: not confirmed: nothing was unlinked")));
  EXPECT_EQ(RunJson({"ls", "--json"}).size(), 2u);

  ProgramResult confirmed = test::RunOnATerminal(Memctl(), args, {}, "y\n");
  EXPECT_EQ(confirmed.exit_code, 0) << Describe(confirmed);
  EXPECT_THAT(confirmed.out, HasSubstr("unlinked job/a\r\nunlinked job/b\r\n"));
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

// Issue 29, against a hostile user: memctl run by another uid, on a daemon
// every user may reach.
class MemctlOtherUserTest : public MemctlTest {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start({"--socket-mode", "0666"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    test::LetOthersTraverse(daemon_->socket_dir());
  }

  // memctl args... as `uid` (its own group, no others), through setpriv.
  ProgramResult RunAs(uid_t uid, std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {absl::StrCat("--reuid=", uid), absl::StrCat("--regid=", uid),
                               "--clear-groups", Memctl(), "--socket-dir",
                               daemon_->socket_dir()});
    return RunProgram("/usr/bin/setpriv", args, input);
  }
};

// Another uid may read the buffer, and sees that it is held, not by whom.
TEST_F(MemctlOtherUserTest, InspectByAnotherUserCountsOthersLeasesButNamesNoHolder) {
  Put("shared", "bytes", {"--mode", "0644"});
  Holder reader = HoldLease("shared");
  ASSERT_TRUE(reader.lease.has_value());

  ProgramResult inspect = RunAs(test::kMallory, {"inspect", "shared"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, HasSubstr("\nheld by "));
  EXPECT_THAT(inspect.out, HasSubstr(" 1 lease held by other users\n"));
  EXPECT_THAT(inspect.out, Not(HasSubstr("session ")));
  EXPECT_THAT(inspect.out, Not(HasSubstr(absl::StrCat("pid ", ::getpid()))));
  ProgramResult json = RunAs(test::kMallory, {"inspect", "--json", "shared"});
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  const Json holders = Json::parse(json.out).at("holders");
  EXPECT_TRUE(holders.at("listed").empty()) << holders.dump();
  EXPECT_EQ(holders.at("other_users_leases"), 1);
}

// unlink -r by a user unlinks what it may and nothing else: the daemon
// refuses each other user's buffer, and memctl says so and exits 1.
TEST_F(MemctlOtherUserTest, UnlinkRecursiveByAnotherUserRemovesOnlyWhatItMayUnlink) {
  Put("job/root-shared", "x", {"--mode", "0644"});
  Put("job/root-private", "x");
  ProgramResult made = RunAs(test::kMallory, {"put", "job/mallory", "-"}, "mine");
  ASSERT_EQ(made.exit_code, 0) << Describe(made);

  ProgramResult attack = RunAs(test::kMallory, {"unlink", "-r", "--yes", "job/"});
  EXPECT_EQ(attack.exit_code, kExitFailed) << Describe(attack);
  EXPECT_EQ(attack.out, "unlinked job/mallory\n");
  EXPECT_THAT(attack.err,
              AllOf(HasSubstr("memctl: unlink job/root-shared: PERMISSION_DENIED: uid 61003 "
                              "may not unlink buffer 'job/root-shared'"),
                    HasSubstr("memctl: unlink: PERMISSION_DENIED: 1 of 2 names failed")));
  EXPECT_THAT(attack.err, Not(HasSubstr("root-private"))) << "not even listed to it";
  Json left = RunJson({"ls", "--json", "job/"});
  ASSERT_EQ(left.size(), 2u) << left.dump();
  EXPECT_EQ(left[0].at("name"), "job/root-private");
  EXPECT_EQ(left[1].at("name"), "job/root-shared");
}

}  // namespace
}  // namespace memd::memctl_test
