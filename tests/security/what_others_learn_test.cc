// Issue 22, finding 6: what another uid could learn. Stat, Open and Unlink
// of someone's private name answered with its owner, group and mode; ids
// were global counters, so a client's next lease, transfer or session id
// told how many every other user had taken meanwhile.
//
// What a uid may learn of others (docs/security.md, "What a client learns
// of others"): that a name is taken (Create would tell it anyway), and
// node-wide capacity; nothing else of a buffer it may not read, and nothing
// of others' activity through ids.

#include <unistd.h>

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/held_attack.h"
#include "tests/security/slow_copies.h"
#include "tests/support/hostile.h"

namespace memd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using test::Describe;
using test::kMallory;
using test::kMiB;
using test::ProgramResult;
using test::RawSession;

class WhatOthersLearnTest : public test::SlowCopyDaemonTest {
 protected:
  // Whether `later` could be `earlier` counted on by at most `most`: ids
  // that tell how many came between.
  static bool CountsOn(std::uint64_t earlier, std::uint64_t later, std::uint64_t most) {
    return later > earlier && later - earlier <= most;
  }

  // A host buffer of the owner's, sealed, that it keeps (with its lease).
  v1::Lease Sealed(const RawSession& owner, const std::string& name, std::uint64_t size,
                   std::uint32_t mode) {
    v1::Lease made = Create(owner, name, size, "host", mode);
    EXPECT_TRUE(Seal(owner, made.lease_id()).ok()) << name;
    return made;
  }

  // What memd-hostile ARGS... printed as Mallory, line by line; a run that
  // failed fails the test.
  std::vector<std::string> AsMallory(const std::vector<std::string>& args) {
    ProgramResult run = Hostile(kMallory, args);
    EXPECT_EQ(run.exit_code, 0) << Describe(run);
    return absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  }
};

TEST_F(WhatOthersLearnTest, ARefusalTellsAnotherUidNothingOfTheBuffer) {
  StartSlowDaemon();
  RawSession owner = Session();
  Sealed(owner, "owner/private", 12345, 0600);

  const std::vector<std::string> lines = AsMallory({"probe_private", "owner/private"});
  EXPECT_THAT(
      lines,
      ElementsAre(
          "Stat PERMISSION_DENIED: uid 61003 may not inspect buffer 'owner/private'",
          "OpenRead PERMISSION_DENIED: uid 61003 may not read buffer 'owner/private'",
          "OpenWrite PERMISSION_DENIED: uid 61003 may not write buffer 'owner/private'",
          "Unlink PERMISSION_DENIED: uid 61003 may not unlink buffer 'owner/private': only "
          "its owner and root may",
          "OpenOrCreate PERMISSION_DENIED: uid 61003 may not read buffer 'owner/private'"));
  for (const char* detail : {"uid 0", "gid", "0600", "12345", "host"}) {
    EXPECT_THAT(absl::StrJoin(lines, "\n"), Not(HasSubstr(detail)));
  }
}

TEST_F(WhatOthersLearnTest, StatsTellAUidItsOwnActivityAndRootTheDaemons) {
  StartSlowDaemon();
  // Another client's activity: buffers, sessions, leases, a copy running
  // (seconds on the slow link) and one that finished.
  RawSession busy = Session();
  RawSession idle = Session();
  v1::Lease source = Create(busy, "busy/src", 32 * kMiB);
  v1::Lease device = Create(busy, "busy/device", 32 * kMiB, "device:0");
  v1::Lease copy = Create(busy, "busy/copy", 32 * kMiB);
  Copy(busy, source.lease_id(), copy.lease_id(), 32 * kMiB);
  Copy(busy, source.lease_id(), device.lease_id(), 32 * kMiB);

  ProgramResult mine = Hostile(kMallory, {"show_stats", "mallory"});
  ASSERT_EQ(mine.exit_code, 0) << Describe(mine);
  EXPECT_EQ(mine.out,
            "daemon_wide 0 buffers 1 sessions 1 leases 1 waits 0 active 0 active_bytes 0 "
            "completed 0 memory_waits 0\n");

  const v1::StatsReply all = Stats(idle);
  EXPECT_TRUE(all.daemon_wide());
  EXPECT_GE(all.buffers(), 3u);
  EXPECT_GE(all.sessions(), 2u);
  EXPECT_GE(all.transfers().active(), 1u) << "the copy to device:0 still runs";
}

// Issue 29: Stat says who holds a buffer's leases. The holder's session,
// pid and process are its uid's business: another uid that may read the
// buffer learns only how many leases others hold (lease_count says as
// much), and a List entry carries no holder at all.
TEST_F(WhatOthersLearnTest, StatTellsAnotherUidHowManyLeasesOthersHoldButNotWho) {
  StartSlowDaemon();
  RawSession owner = Session();
  Sealed(owner, "owner/shared", 4096, 0644);

  const std::vector<std::string> lines = AsMallory({"show_holders", "owner/shared"});
  ASSERT_EQ(lines.size(), 3u) << absl::StrJoin(lines, "\n");
  EXPECT_THAT(lines[0], ::testing::StartsWith("holder session "));
  EXPECT_THAT(lines[0], HasSubstr(" uid 61003 ")) << "only Mallory's own session";
  EXPECT_THAT(lines[0], Not(HasSubstr(absl::StrCat("session ", owner.id, " "))));
  EXPECT_THAT(lines[0], Not(HasSubstr(absl::StrCat("pid ", ::getpid(), " "))));
  EXPECT_EQ(lines[1], "unlisted 0 other_users 1 lease_count 2");
  EXPECT_EQ(lines[2], "list_holders 0");
}

// Issue 29: List may show buffers unlinked while leased, but only to whom
// could list them while they were named: a private one stays unseen.
TEST_F(WhatOthersLearnTest, UnlinkedBuffersListOnlyToThoseWhoCouldReadThem) {
  StartSlowDaemon();
  RawSession owner = Session();
  Create(owner, "owner/private", 4096, "host", 0600);
  Create(owner, "owner/public", 4096, "host", 0644);
  for (const char* name : {"owner/private", "owner/public"}) {
    v1::UnlinkRequest unlink;
    unlink.set_name(name);
    v1::UnlinkReply unlinked;
    ASSERT_TRUE(owner.Call(&v1::Memd::Stub::Unlink, unlink, &unlinked).ok()) << name;
  }
  EXPECT_THAT(AsMallory({"list_unlinked", "owner/"}),
              ElementsAre("owner/public unlinked leases 1"));
}

// Issue 29: an unlink that names the buffer it expects (memctl unlink -r)
// tells another uid nothing either: her refusal is the owner's rule, the
// same whether she guessed the buffer's id or not, and never says which
// buffer the name holds now; an absurd id is a plain mismatch.
TEST_F(WhatOthersLearnTest, AnUnlinkExpectingAnIdTellsAnotherUidNothingOfTheBuffer) {
  StartSlowDaemon();
  RawSession owner = Session();
  const std::uint64_t id = Create(owner, "owner/readable", 4096, "host", 0644).buffer().id();
  const std::string guess = absl::StrCat(id + 1);
  for (const std::string& expected : {absl::StrCat(id), guess}) {
    const std::vector<std::string> lines = AsMallory({"unlink_expecting", "owner/readable", expected});
    ASSERT_EQ(lines.size(), 1u) << expected;
    EXPECT_THAT(lines[0], ::testing::StartsWith("PERMISSION_DENIED")) << expected;
    EXPECT_THAT(lines[0], Not(HasSubstr("now names"))) << expected;
  }
  v1::UnlinkRequest absurd;
  absurd.set_name("owner/readable");
  absurd.set_expected_id(std::numeric_limits<std::uint64_t>::max());
  v1::UnlinkReply unlinked;
  EXPECT_EQ(owner.Call(&v1::Memd::Stub::Unlink, absurd, &unlinked).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::StatRequest stat;
  stat.set_name("owner/readable");
  v1::BufferInfo info;
  EXPECT_TRUE(owner.Call(&v1::Memd::Stub::Stat, stat, &info).ok()) << "still there";
}

// Issue 29: ListTransfers shows a uid its own copies only, with their
// names; root sees every uid's, with whose they are. The owner's copy takes
// seconds on the slow link and mallory's holds with her session, so both
// are unfinished while each looks.
TEST_F(WhatOthersLearnTest, ListTransfersShowsAUidItsOwnCopiesAndRootEveryones) {
  StartSlowDaemon();
  RawSession owner = Session();
  v1::Lease source = Create(owner, "owner/secret-src", 64 * kMiB);
  v1::Lease device = Create(owner, "owner/secret-dst", 64 * kMiB, "device:0");
  const std::uint64_t owners = Copy(owner, source.lease_id(), device.lease_id(), 64 * kMiB);

  test::HeldAttack attack(kMallory, config_.socket_dir, {"list_transfers", "mallory"},
                          Gate("gate"));
  const std::string report = attack.Report();
  const std::vector<std::string> lines = absl::StrSplit(report, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << report << Describe(attack.Release());
  EXPECT_THAT(lines[0], ::testing::MatchesRegex(
                            "transfer [0-9]+ mallory/src@host -> mallory/dst@device:0 uid 61003"));
  EXPECT_EQ(lines[1], "omitted 0");
  for (const std::string& detail : {std::string("owner/"), std::to_string(owners)}) {
    EXPECT_THAT(report, Not(HasSubstr(detail))) << "of another uid's copy";
  }

  v1::ListTransfersReply all;
  ASSERT_TRUE(owner.Call(&v1::Memd::Stub::ListTransfers, v1::ListTransfersRequest(), &all).ok());
  std::vector<std::string> seen;
  for (const v1::TransferInfo& info : all.transfers()) {
    seen.push_back(absl::StrCat(info.source_name(), " uid ", info.uid(),
                                info.pid() > 0 ? " with a pid" : " without a pid"));
  }
  EXPECT_THAT(seen, ::testing::UnorderedElementsAre("owner/secret-src uid 0 with a pid",
                                                    "mallory/src uid 61003 with a pid"));
  EXPECT_EQ(attack.Release().exit_code, 0);
}

TEST_F(WhatOthersLearnTest, IdsSayNothingOfHowManyOthersTookMeanwhile) {
  StartSlowDaemon();
  RawSession watcher = Session();
  RawSession busy = Session();
  v1::Lease first_lease = Create(watcher, "watcher/a", 4096);
  v1::Lease spare = Create(watcher, "watcher/b", 4096);
  const std::uint64_t first_transfer =
      Copy(watcher, first_lease.lease_id(), spare.lease_id(), 4096);

  // Another client's activity between the watcher's two looks.
  v1::Lease source = Create(busy, "busy/src", 4096);
  std::vector<RawSession> sessions;
  for (int i = 0; i < 20; ++i) {
    v1::Lease lease = Create(busy, "busy/" + std::to_string(i), 4096);
    Copy(busy, source.lease_id(), lease.lease_id(), 4096);
    sessions.push_back(Session());
  }

  v1::Lease second_lease = Create(watcher, "watcher/c", 4096);
  const std::uint64_t second_transfer =
      Copy(watcher, first_lease.lease_id(), second_lease.lease_id(), 4096);
  RawSession late = Session();
  EXPECT_FALSE(CountsOn(first_lease.lease_id(), second_lease.lease_id(), 1000))
      << first_lease.lease_id() << " then " << second_lease.lease_id();
  EXPECT_FALSE(CountsOn(first_transfer, second_transfer, 1000))
      << first_transfer << " then " << second_transfer;
  EXPECT_FALSE(CountsOn(busy.id, late.id, 1000)) << busy.id << " then " << late.id;
  EXPECT_FALSE(CountsOn(first_lease.buffer().id(), second_lease.buffer().id(), 1000))
      << first_lease.buffer().id() << " then " << second_lease.buffer().id();
}

}  // namespace
}  // namespace memd
