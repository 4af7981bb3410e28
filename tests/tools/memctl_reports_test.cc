// memctl end to end, on what the daemon reports: stats (once and --watch),
// trim, sessions, usage against the quota, advice and the leak report.

#include "tests/tools/memctl_fixture.h"

namespace memd::memctl_test {
namespace {

// End to end once the broker counts usage and answers Advise (issue 25).
// Expects a daemon whose advice rules call a buffer idle at once
// (unlink_idle 0): a sealed buffer nobody opened is an unlink candidate.
TEST_F(MemctlTest, AdvisePrintsOneLinePerRecommendationAndInspectTheCounters) {
  Put("advice-e2e/0", "12345678");
  EXPECT_EQ(Run({"advise", "advice-e2e/"}).out, "no advice for advice-e2e/*\n");
  // Read only from a copy in pinned memory, 16 times: a move there.
  for (int i = 0; i < 16; ++i) {
    ProgramResult get = Run({"get", "advice-e2e/0", "--location", "pinned"});
    ASSERT_EQ(get.exit_code, 0) << Describe(get);
    ASSERT_EQ(get.out, "12345678");
  }
  ProgramResult text = Run({"advise", "advice-e2e/"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, AllOf(HasSubstr("advice-e2e/: "), HasSubstr("-> move to pinned")));
  Json json = RunJson({"advise", "--json", "advice-e2e/"});
  ASSERT_EQ(json.size(), 1u) << json.dump();
  EXPECT_EQ(json[0].at("action"), "move");
  EXPECT_EQ(json[0].at("locations"), Json::array({"pinned"}));
  ProgramResult none = Run({"advise", "nothing-here/"});
  EXPECT_EQ(none.out, "no advice for nothing-here/*\n");
  ProgramResult inspect = Run({"inspect", "advice-e2e/0"});
  EXPECT_THAT(inspect.out, AllOf(HasSubstr("opens"), HasSubstr("pinned 16")));
}

// The leak report end to end (issue 26): --older-than 0s counts a fresh
// buffer; this test's own client holds a buffer unsealed, which shows as
// itself, its lease, and (with --many-leases 1) its session.
TEST_F(MemctlTest, LeaksListsWhatLooksForgottenAsATableAndAsJson) {
  Put("leaks-e2e/kept", "12345678");
  EXPECT_EQ(Run({"leaks"}).out,
            "no leaks: nothing older than 1h, no session holding 1024 leases or more\n");

  ProgramResult text = Run({"leaks", "--older-than", "0s"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  const std::vector<std::string> lines = absl::StrSplit(text.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << text.out;
  EXPECT_THAT(lines[0], AllOf(StartsWith("UID"), HasSubstr("KIND"), HasSubstr("SUBJECT"),
                              HasSubstr("BYTES"), HasSubstr("AGE"), HasSubstr("PID"),
                              HasSubstr("EVIDENCE")));
  EXPECT_THAT(lines[1], AllOf(HasSubstr(absl::StrCat(::getuid(), "  never_opened")),
                              HasSubstr("leaks-e2e/kept"), HasSubstr("4 KiB"),
                              HasSubstr("sealed, never opened in")));

  auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  auto held = (*client)->Create("leaks-e2e/held", 4096);
  ASSERT_TRUE(held.ok()) << held.status();
  Json json = RunJson({"leaks", "--older-than", "0", "--many-leases", "1", "--json"});
  EXPECT_EQ(json.at("omitted"), 0);
  std::vector<std::string> kinds;
  for (const Json& leak : json.at("leaks")) {
    kinds.push_back(leak.at("kind").get<std::string>());
    EXPECT_EQ(leak.at("uid"), ::getuid());
    if (leak.at("kind") == "many_leases") {
      EXPECT_THAT(leak.at("subject").get<std::string>(),
                StartsWith(absl::StrCat("session ", (*client)->session_id(), " (")));
      EXPECT_EQ(leak.at("pid"), ::getpid());
      EXPECT_EQ(leak.at("bytes"), 0);
    }
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"never_opened", "unsealed_idle", "idle_lease",
                                             "many_leases"}))
      << json.dump();
  EXPECT_EQ(json.at("leaks")[1].at("subject"), "leaks-e2e/held");
  EXPECT_EQ(json.at("leaks")[1].at("bytes"), 4096);
  EXPECT_GE(json.at("leaks")[1].at("age_seconds"), 0.0);

  const std::vector<std::vector<std::string>> refused_lines = {
      {"leaks", "--older-than", "-1s"},
      {"leaks", "--older-than", "soon"},
      {"leaks", "--older-than", "3651d"},
      {"leaks", "--many-leases", "0"}};
  for (const std::vector<std::string>& bad : refused_lines) {
    ProgramResult refused = Run(bad);
    EXPECT_EQ(refused.exit_code, kExitUsage) << absl::StrJoin(bad, " ") << Describe(refused);
    EXPECT_THAT(refused.out, IsEmpty());
  }
}

TEST_F(MemctlTest, StatsJsonReportsPoolsAndCountsWhereverTheFlagGoes) {
  Json empty = RunJson({"--json", "stats"});
  EXPECT_EQ(empty.at("buffers"), 0);
  const std::uint64_t used_before = HostPool(empty).at("used_bytes");

  Put("stats/a", std::string(10000, 'a'));
  Put("stats/b", "b");
  Json stats = RunJson({"stats", "--json"});
  for (const char* field : {"version", "backend", "metrics_address", "buffers",
                            "sessions", "leases", "pools", "started_unix_ns"}) {
    EXPECT_TRUE(stats.contains(field)) << field << " missing from " << stats.dump();
  }
  EXPECT_THAT(stats.at("version").get<std::string>(), Not(IsEmpty()));
  EXPECT_EQ(stats.at("backend"), "host");
  EXPECT_THAT(stats.at("metrics_address").get<std::string>(), StartsWith("127.0.0.1:"));
  EXPECT_EQ(stats.at("socket_dir"), daemon_->socket_dir());
  EXPECT_EQ(stats.at("buffers"), 2);
  EXPECT_GE(stats.at("sessions").get<int>(), 1);  // This memctl.
  EXPECT_EQ(stats.at("leases"), 0);
  const Json& durability = stats.at("durability");
  EXPECT_EQ(durability.at("generation"), 1);
  EXPECT_EQ(durability.at("recovered"), false);
  EXPECT_EQ(durability.at("adopted_buffers"), 0);

  Json host = HostPool(stats);
  for (const char* field :
       {"location", "reserved_bytes", "used_bytes", "hit_count", "miss_count",
        "segments", "limit_bytes", "free_bytes", "peak_reserved_bytes",
        "peak_used_bytes", "largest_free_block_bytes", "fragmentation",
        "scrubbed_bytes", "trimmed_bytes", "size_classes"}) {
    EXPECT_TRUE(host.contains(field)) << field << " missing from " << host.dump();
  }
  EXPECT_EQ(host.at("free_bytes").get<std::uint64_t>(),
            host.at("reserved_bytes").get<std::uint64_t>() -
                host.at("used_bytes").get<std::uint64_t>());
  EXPECT_GE(host.at("peak_used_bytes").get<std::uint64_t>(),
            host.at("used_bytes").get<std::uint64_t>());
  // "stats/a" (10000 bytes) went to the 12 KiB class, "stats/b" to 4 KiB.
  const Json& classes = host.at("size_classes");
  ASSERT_GT(classes.size(), 2u);
  EXPECT_EQ(classes[0].at("bytes"), 4096);
  EXPECT_EQ(classes[0].at("allocations"), 1);
  EXPECT_EQ(classes[2].at("bytes"), 12288);
  EXPECT_EQ(classes[2].at("allocations"), 1);
  const std::uint64_t used = host.at("used_bytes");
  EXPECT_GE(used, used_before + 10001);
  EXPECT_GE(host.at("reserved_bytes").get<std::uint64_t>(), used);
  EXPECT_GE(host.at("segments").get<std::uint64_t>(), 1u);
  EXPECT_GE(host.at("hit_count").get<std::uint64_t>() +
                host.at("miss_count").get<std::uint64_t>(),
            2u);
}

TEST_F(MemctlTest, StatsShowsCountsAndAPoolTable) {
  Put("s", "x");
  ProgramResult stats = Run({"stats"});
  ASSERT_EQ(stats.exit_code, 0) << Describe(stats);
  EXPECT_THAT(stats.out, AllOf(HasSubstr("backend host"), HasSubstr("buffers 1"),
                               HasSubstr("LOCATION"), HasSubstr("RESERVED"),
                               HasSubstr("USED"), HasSubstr("\nhost ")));
  // A daemon that found nothing to take back says so.
  EXPECT_THAT(stats.out, AllOf(HasSubstr("\ndurability "),
                               HasSubstr("\ngeneration 1, started from nothing\n")));
}

TEST_F(MemctlTest, StatsWatchShowsCountViewsAndExits) {
  Put("w", "x");
  ProgramResult watch = Run({"stats", "--watch", "0.05", "--count", "3"});
  ASSERT_EQ(watch.exit_code, 0) << Describe(watch);
  std::vector<std::string> views = absl::StrSplit(watch.out, "\n\n", absl::SkipEmpty());
  ASSERT_EQ(views.size(), 3u) << watch.out;
  for (const std::string& view : views) {
    EXPECT_THAT(view, AllOf(StartsWith("memd "), HasSubstr("buffers 1"),
                            HasSubstr("LOCATION"), HasSubstr("HIT%"), HasSubstr("\nhost ")));
  }
  // Not a terminal: no escape codes to redraw.
  EXPECT_THAT(watch.out, Not(HasSubstr("\033")));
}

TEST_F(MemctlTest, StatsWatchJsonWritesOneTimestampedObjectPerLine) {
  ProgramResult watch = Run({"stats", "--watch", "0.1", "--count", "3", "--json"});
  ASSERT_EQ(watch.exit_code, 0) << Describe(watch);
  std::vector<std::string> lines = absl::StrSplit(watch.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << watch.out;
  std::int64_t previous = 0;
  for (const std::string& line : lines) {
    Json view = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(view.is_discarded()) << line;
    EXPECT_EQ(view.at("socket_dir"), daemon_->socket_dir());
    EXPECT_TRUE(view.at("pools").is_array());
    const std::int64_t taken = view.at("time_unix_ns");
    // Views are at least --watch apart.
    if (previous != 0) {
      EXPECT_GE(taken - previous, 100'000'000) << watch.out;
    }
    previous = taken;
  }
}

TEST_F(MemctlTest, TrimGivesIdleMemoryBackAndSaysHowMuch) {
  Put("t", std::string(3 << 20, 't'));  // A large segment of its own.
  ProgramResult unlinked = Run({"unlink", "t"});
  ASSERT_EQ(unlinked.exit_code, 0) << Describe(unlinked);
  EXPECT_EQ(HostPool(RunJson({"stats", "--json"})).at("reserved_bytes"), 3 << 20);

  Json trimmed = RunJson({"trim", "host", "--json"});
  ASSERT_TRUE(trimmed.is_array());
  ASSERT_EQ(trimmed.size(), 1u);
  EXPECT_EQ(trimmed[0].at("location"), "host");
  EXPECT_EQ(trimmed[0].at("released_bytes"), 3 << 20);
  Json host = HostPool(RunJson({"stats", "--json"}));
  EXPECT_EQ(host.at("reserved_bytes"), 0);
  EXPECT_EQ(host.at("trimmed_bytes"), 3 << 20);

  ProgramResult text = Run({"trim"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, AllOf(HasSubstr("host: gave back 0 B"),
                              HasSubstr("pinned: gave back 0 B")));
  ExpectFailure(Run({"trim", "device:7"}), "trim device:7", "NOT_FOUND");
}

TEST_F(MemctlTest, SessionsListMemctlItself) {
  Json sessions = RunJson({"sessions", "--json"});
  ASSERT_TRUE(sessions.is_array());
  const Json* self = nullptr;
  for (const Json& session : sessions) {
    if (session.at("command") == "memctl") self = &session;
  }
  ASSERT_NE(self, nullptr) << sessions.dump();
  EXPECT_EQ(self->at("uid"), ::getuid());
  EXPECT_EQ(self->at("gid"), ::getgid());
  EXPECT_GT(self->at("pid").get<int>(), 0);
  EXPECT_NE(self->at("pid").get<int>(), ::getpid());
  EXPECT_GT(self->at("id").get<std::uint64_t>(), 0u);
  EXPECT_EQ(self->at("lease_count"), 0);
  EXPECT_EQ(self->at("created_bytes"), 0);
  EXPECT_GT(self->at("started_unix_ns").get<std::int64_t>(), 0);

  ProgramResult text = Run({"sessions"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, AllOf(HasSubstr("PID"), HasSubstr("CREATED"),
                              HasSubstr("memctl (this memctl)")));
}

TEST_F(MemctlTest, UsageShowsWhatBuffersTakeAgainstTheQuota) {
  Put("u/one", std::string(3 << 20, '1'));
  Put("u/two", std::string(1 << 20, '2'));
  Json usage = RunJson({"usage", "--json"});
  ASSERT_TRUE(usage.is_array());
  ASSERT_EQ(usage.size(), 1u) << usage.dump();
  EXPECT_EQ(usage[0].at("uid"), ::getuid());
  EXPECT_EQ(usage[0].at("location"), "host");
  EXPECT_EQ(usage[0].at("bytes"), 4 << 20);
  EXPECT_EQ(usage[0].at("buffers"), 2);
  EXPECT_EQ(usage[0].at("quota_bytes"), 0) << "this daemon has no quota";

  // A daemon with one shows how much of it is used.
  auto limited = DaemonProcess::Start({"--max-uid-bytes", "host=16MiB"});
  ASSERT_TRUE(limited.ok()) << limited.status();
  const std::vector<std::string> at = {"--socket-dir", (*limited)->socket_dir()};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), at.begin(), at.end());
    return RunProgram(Memctl(), args, std::string(4 << 20, 'q'));
  };
  ASSERT_EQ(with({"put", "q", "-"}).exit_code, 0);
  ProgramResult text = with({"usage"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("USE%"));
  EXPECT_THAT(text.out, HasSubstr("4 MiB"));
  EXPECT_THAT(text.out, HasSubstr("16 MiB"));
  EXPECT_THAT(text.out, HasSubstr("25.0"));
  // Over the quota, put fails with the numbers and leaves nothing.
  ProgramResult over = RunProgram(Memctl(), {"--socket-dir", (*limited)->socket_dir(),
                                             "put", "big", "-"},
                                  std::string(13 << 20, 'b'));
  EXPECT_EQ(over.exit_code, kExitFailed);
  EXPECT_THAT(over.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(over.err, HasSubstr("over its quota of 16 MiB"));
}

}  // namespace
}  // namespace memd::memctl_test
