// memctl end to end: a real memd per test, the real memctl binary, and
// assertions on what an operator or a script would see (stdout, stderr,
// exit code).

#include "tests/tools/memctl_fixture.h"

namespace memd::memctl_test {
namespace {

TEST_F(MemctlTest, PutThenGetRoundTripsEveryByteValue) {
  const std::string bytes = AllByteValues();
  Put("bytes/all", bytes);

  ProgramResult get = Run({"get", "bytes/all"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(get.out, bytes);
  EXPECT_THAT(get.err, IsEmpty());
}

// A consumer that trusts one producer names it: anyone who may connect can
// create a name first (issue 9, finding 9).
TEST_F(MemctlTest, GetWithOwnerAcceptsOnlyThatOwnersBuffer) {
  Put("jobs/result", "payload");
  for (const char* owner : {"0", "root"}) {
    ProgramResult get = Run({"get", "--owner", owner, "jobs/result"});
    EXPECT_EQ(get.exit_code, 0) << owner << "\n" << Describe(get);
    EXPECT_EQ(get.out, "payload") << owner;
  }
  ProgramResult other = Run({"get", "--owner", "61003", "jobs/result"});
  ExpectFailure(other, "get jobs/result", "PERMISSION_DENIED");
  EXPECT_THAT(other.err, HasSubstr("owned by uid 0, not by the demanded uid 61003"));
  // Waiting does not help: the name is taken by another owner.
  ExpectFailure(Run({"get", "--wait", "30", "--owner", "61003", "jobs/result"}),
                "get jobs/result", "PERMISSION_DENIED");
}

TEST_F(MemctlTest, PutThenGetRoundTripsAMultiMebibyteFileThroughOutputFile) {
  const std::string bytes = RandomBytes((std::size_t{5} << 20) + 123, 7);
  const std::string input = WriteFile("big.in", bytes);
  ProgramResult put = Run({"put", "big", input});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  EXPECT_THAT(put.out, AllOf(HasSubstr("big"), HasSubstr("5 MiB"), HasSubstr("sealed")));

  const std::string output = files_.Join("big.out");
  ProgramResult get = Run({"get", "big", "-o", output});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_THAT(get.out, HasSubstr(output));
  EXPECT_TRUE(ReadWholeFile(output) == bytes) << "the copy differs";

  const std::string again = files_.Join("again.out");
  Json json = RunJson({"get", "big", "--output", again, "--json"});
  EXPECT_EQ(json.at("name"), "big");
  EXPECT_EQ(json.at("size_bytes"), bytes.size());
  EXPECT_EQ(json.at("output"), again);
  EXPECT_TRUE(ReadWholeFile(again) == bytes) << "the copy differs";
}

TEST_F(MemctlTest, PutReadsStdinAndDevStdinPipes) {
  const std::string bytes = RandomBytes(300000, 11);  // More than a pipe holds.
  ProgramResult dash = Run({"put", "from/dash", "-"}, bytes);
  ASSERT_EQ(dash.exit_code, 0) << Describe(dash);
  ProgramResult dev = Run({"put", "from/dev", "/dev/stdin"}, bytes);
  ASSERT_EQ(dev.exit_code, 0) << Describe(dev);

  for (const std::string name : {"from/dash", "from/dev"}) {
    Json info = RunJson({"inspect", name, "--json"});
    EXPECT_EQ(info.at("size_bytes"), bytes.size()) << name;
    ProgramResult get = Run({"get", name});
    ASSERT_EQ(get.exit_code, 0) << Describe(get);
    EXPECT_TRUE(get.out == bytes) << name << " differs";
  }
}

TEST_F(MemctlTest, PutFromAnEndlessStreamStopsAtTheLimitAndAsksForSize) {
  // Without --size a stream is collected in memory first: never without
  // bound.
  ProgramResult endless = Run({"put", "zeros", "/dev/zero", "--max-stream", "4MiB"});
  ExpectFailure(endless, "read /dev/zero", "RESOURCE_EXHAUSTED");
  EXPECT_THAT(endless.err, HasSubstr("more than 4 MiB (4194304 bytes)"));
  EXPECT_THAT(endless.err, HasSubstr("pass --size BYTES"));
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());

  // With --size it streams straight into the buffer: a device gives its
  // first BYTES.
  ProgramResult sized = Run({"put", "zeros", "/dev/zero", "--size", "3MiB"});
  ASSERT_EQ(sized.exit_code, 0) << Describe(sized);
  ProgramResult get = Run({"get", "zeros"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_TRUE(get.out == std::string(3 << 20, '\0')) << get.out.size() << " bytes";
}

TEST_F(MemctlTest, PutWithSizeRefusesAPipeThatEndsEarlyOrRunsOn) {
  const std::string hundred = RandomBytes(100, 3);
  ProgramResult early = Run({"put", "p", "-", "--size", "100"}, hundred.substr(0, 99));
  ExpectFailure(early, "read stdin", "FAILED_PRECONDITION");
  EXPECT_THAT(early.err, HasSubstr("ended after 99 of the 100 bytes --size promised"));
  ProgramResult long_run = Run({"put", "p", "-", "--size", "100"}, hundred + "x");
  ExpectFailure(long_run, "read stdin", "FAILED_PRECONDITION");
  EXPECT_THAT(long_run.err, HasSubstr("more than the 100 bytes --size promised"));
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());

  // A file's size is known: --size must agree with it.
  ProgramResult file = Run({"put", "f", WriteFile("five", "12345"), "--size", "6"});
  ExpectFailure(file, "put f", "INVALID_ARGUMENT");
  EXPECT_THAT(file.err, HasSubstr("has 5 bytes, not the 6 of --size"));

  ProgramResult exact = Run({"put", "p", "-", "--size", "100"}, hundred);
  ASSERT_EQ(exact.exit_code, 0) << Describe(exact);
  EXPECT_EQ(Run({"get", "p"}).out, hundred);
}

TEST_F(MemctlTest, PutJsonDescribesTheSealedBuffer) {
  ProgramResult put = Run({"put", "--json", "--mode", "0640", "j/one",
                           WriteFile("in", "hello")});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  Json json = Json::parse(put.out);
  EXPECT_EQ(json.at("name"), "j/one");
  EXPECT_EQ(json.at("size_bytes"), 5);
  EXPECT_EQ(json.at("state"), "sealed");
  EXPECT_EQ(json.at("persistence"), "persistent");
  EXPECT_EQ(json.at("mode"), "0640");
  EXPECT_EQ(json.at("location"), "host");
}

// --attr tells readers what the bytes are; inspect shows it, --json as an
// object; a malformed or repeated --attr is a usage error (exit 2).
TEST_F(MemctlTest, PutAttributesShowInInspect) {
  Put("typed", "12345678", {"--attr", "dtype=float32", "--attr", "shape=2,1"});
  ProgramResult inspect = Run({"inspect", "typed"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, AllOf(HasSubstr("attr dtype"), HasSubstr("float32"),
                                 HasSubstr("attr shape"), HasSubstr("2,1")));
  Json json = RunJson({"inspect", "typed", "--json"});
  EXPECT_EQ(json.at("attrs"), (Json{{"dtype", "float32"}, {"shape", "2,1"}}));

  const std::string file = WriteFile("in", "x");
  ProgramResult no_equals = Run({"put", "--attr", "dtype", "bad1", file});
  EXPECT_EQ(no_equals.exit_code, 2) << Describe(no_equals);
  EXPECT_THAT(no_equals.err, HasSubstr("KEY=VALUE"));
  ProgramResult twice = Run({"put", "--attr", "a=1", "--attr", "a=2", "bad2", file});
  EXPECT_EQ(twice.exit_code, 2) << Describe(twice);
  EXPECT_THAT(twice.err, HasSubstr("given twice"));
  ProgramResult refused = Run({"put", "--attr", "a/b=1", "bad3", file});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("keys use only"));
  EXPECT_EQ(Run({"inspect", "bad3"}).exit_code, 1) << "nothing was left behind";
}

TEST_F(MemctlTest, PutAtLocationAutoSaysInInspectWhichRuleChose) {
  Put("auto/host", "12345678", {"--location", "auto", "--hint", "host_frequent"});
  ProgramResult inspect = Run({"inspect", "auto/host"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, HasSubstr("placement"));
  EXPECT_THAT(inspect.out, HasSubstr("8 B with hint host_frequent: host"));
  Json json = RunJson({"inspect", "auto/host", "--json"});
  EXPECT_EQ(json.at("location"), "host");
  EXPECT_EQ(json.at("placement"), "8 B with hint host_frequent: host");

  // A named location has no placement line.
  Put("named", "x");
  EXPECT_THAT(Run({"inspect", "named"}).out, Not(HasSubstr("placement")));
  EXPECT_EQ(RunJson({"inspect", "named", "--json"}).at("placement"), "");

  const std::string file = WriteFile("in", "x");
  ProgramResult bad_hint = Run({"put", "--location", "auto", "--hint", "gpu_please", "bad", file});
  EXPECT_NE(bad_hint.exit_code, 0);
  EXPECT_THAT(bad_hint.err, HasSubstr("unknown access hint 'gpu_please'"));
  ProgramResult hint_alone = Run({"put", "--hint", "streaming", "bad2", file});
  EXPECT_NE(hint_alone.exit_code, 0);
  EXPECT_THAT(hint_alone.err, HasSubstr("go with location auto"));
}

TEST_F(MemctlTest, LsAndInspectShowNameSizeModeAndState) {
  Put("frames/0", std::string(1536, 'x'));
  Put("other", "abc");

  ProgramResult ls = Run({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << Describe(ls);
  EXPECT_THAT(ls.out, AllOf(HasSubstr("NAME"), HasSubstr("frames/0"),
                            HasSubstr(FormatBytes(1536)), HasSubstr("0600"),
                            HasSubstr("sealed"), HasSubstr("other")));

  ProgramResult filtered = Run({"ls", "frames/"});
  ASSERT_EQ(filtered.exit_code, 0) << Describe(filtered);
  EXPECT_THAT(filtered.out, HasSubstr("frames/0"));
  EXPECT_THAT(filtered.out, Not(HasSubstr("other")));

  ProgramResult inspect = Run({"inspect", "frames/0"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out,
              AllOf(HasSubstr("frames/0"), HasSubstr("1.5 KiB"), HasSubstr("1536 bytes"),
                    HasSubstr("0600"), HasSubstr("sealed"), HasSubstr("persistent"),
                    HasSubstr("host")));
}

TEST_F(MemctlTest, LsJsonListsBuffersWithDocumentedFields) {
  Put("a/first", "12345", {"--mode", "0640"});
  Put("a/second", std::string(4096, 'y'));

  Json list = RunJson({"ls", "--json"});
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 2u) << list.dump();
  const Json& first = list[0];
  EXPECT_EQ(first.at("name"), "a/first");
  EXPECT_TRUE(first.at("id").is_number_unsigned());
  EXPECT_EQ(first.at("size_bytes"), 5);
  EXPECT_EQ(first.at("location"), "host");
  EXPECT_EQ(first.at("owner_uid"), ::getuid());
  EXPECT_EQ(first.at("owner_gid"), ::getgid());
  EXPECT_EQ(first.at("mode"), "0640");
  EXPECT_EQ(first.at("state"), "sealed");
  EXPECT_EQ(first.at("persistence"), "persistent");
  EXPECT_EQ(first.at("lease_count"), 0);
  EXPECT_EQ(first.at("unlinked"), false);
  EXPECT_GT(first.at("created_unix_ns").get<std::int64_t>(), 0);
  EXPECT_GE(first.at("sealed_unix_ns").get<std::int64_t>(),
            first.at("created_unix_ns").get<std::int64_t>());
  EXPECT_GT(first.at("creator_pid").get<int>(), 0);
  EXPECT_EQ(list[1].at("name"), "a/second");
  EXPECT_EQ(list[1].at("size_bytes"), 4096);
  EXPECT_NE(list[1].at("id"), first.at("id"));

  EXPECT_EQ(RunJson({"--json", "ls", "a/s"}).size(), 1u);
  EXPECT_EQ(RunJson({"ls", "none/", "--json"}), Json::array());
}

TEST_F(MemctlTest, InspectJsonDescribesOneBufferWhereverTheFlagGoes) {
  Put("one", "payload", {"--mode", "0600"});
  Json after = RunJson({"inspect", "one", "--json"});
  Json before = RunJson({"--json", "inspect", "one"});
  EXPECT_EQ(after, before);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after.at("name"), "one");
  EXPECT_EQ(after.at("size_bytes"), 7);
  EXPECT_EQ(after.at("mode"), "0600");
  EXPECT_EQ(after.at("state"), "sealed");
  EXPECT_EQ(after.at("lease_count"), 0);
}

// README, "NUMA placement": put --numa, inspect's numa line (and why a
// buffer is not bound on this machine of one node), a bad node refused.
TEST_F(MemctlTest, PutNumaBindsAndInspectSaysTheNodeOrWhyNone) {
  auto daemon = DaemonProcess::Start({});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket-dir", (*daemon)->socket_dir()});
    return RunProgram(Memctl(), args, std::string(4096, 'n'));
  };
  ASSERT_EQ(with({"put", "--numa", "0", "numa/zero", "-"}).exit_code, 0);
  ProgramResult inspect = with({"inspect", "numa/zero"});
  EXPECT_THAT(inspect.out, HasSubstr("node 0")) << Describe(inspect);
  Json json = Json::parse(with({"inspect", "numa/zero", "--json"}).out, nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json.at("numa_node"), 0);

  ASSERT_EQ(with({"put", "--numa", "auto", "numa/auto", "-"}).exit_code, 0);
  inspect = with({"inspect", "numa/auto"});
  EXPECT_THAT(inspect.out, HasSubstr("- (this machine has one NUMA node)")) << Describe(inspect);
  EXPECT_EQ(Json::parse(with({"inspect", "numa/auto", "--json"}).out).at("numa_node"), -1);

  ProgramResult refused = with({"put", "--numa", "9", "numa/nine", "-"});
  EXPECT_EQ(refused.exit_code, kExitFailed) << Describe(refused);
  EXPECT_THAT(refused.err, HasSubstr("NUMA node 9 does not exist: this machine has one NUMA "
                                     "node")) << Describe(refused);
}

// README, "When memory runs out": put --retention, inspect's retention
// line, and the NOT_FOUND of an evicted name.
TEST_F(MemctlTest, PutRetentionEvictableGivesWayOnAFullHostAndInspectSaysWhy) {
  auto small = DaemonProcess::Start({"--host-pool-limit-bytes", "8MiB"});
  ASSERT_TRUE(small.ok()) << small.status();
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket-dir", (*small)->socket_dir()});
    return RunProgram(Memctl(), args, std::string(2 << 20, 'p'));
  };
  for (const char* name : {"run0/activations", "run0/b", "run0/c", "run0/d"}) {
    ProgramResult put = with({"put", "--retention", "evictable", name, "-"});
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
  }
  ProgramResult inspect = with({"inspect", "run0/b"});
  EXPECT_THAT(inspect.out, HasSubstr("retention")) << Describe(inspect);
  EXPECT_THAT(inspect.out, HasSubstr("evictable")) << Describe(inspect);
  Json json = Json::parse(with({"inspect", "run0/b", "--json"}).out, nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json.at("retention"), "evictable");

  ProgramResult next = with({"put", "--retention", "evictable", "run1/activations", "-"});
  ASSERT_EQ(next.exit_code, 0) << Describe(next);
  ProgramResult gone = with({"inspect", "run0/activations"});
  EXPECT_EQ(gone.exit_code, kExitFailed);
  EXPECT_THAT(gone.err, StartsWith("memctl: inspect run0/activations: NOT_FOUND: no buffer "
                                   "named 'run0/activations': it was evicted at "))
      << Describe(gone);
  EXPECT_THAT(gone.err, HasSubstr(" under memory pressure on host (2 MiB, nobody held it, "
                                  "retention evictable, owner uid 0)"));
  EXPECT_THAT(with({"stats"}).out, HasSubstr("host: under pressure since start, evicted 1 "
                                             "buffer (2 MiB), demoted 0 copies (0 B)\n"));
  // An unknown retention is a usage error before anything is sent.
  EXPECT_EQ(with({"put", "--retention", "forever", "x", "-"}).exit_code, kExitUsage);
  EXPECT_EQ(with({"put", "--wait-for-memory", "forever", "x", "-"}).exit_code, kExitUsage);
  // Every buffer held or pinned: a put that may wait runs out of time and
  // says what holds the host.
  for (const char* name : {"run0/b", "run0/c", "run0/d", "run1/activations"}) {
    ASSERT_EQ(with({"unlink", name}).exit_code, 0) << name;
  }
  for (const char* name : {"p/0", "p/1", "p/2", "p/3"}) {
    ASSERT_EQ(with({"put", name, "-"}).exit_code, 0) << name;
  }
  ProgramResult waited = with({"put", "--wait-for-memory", "0.1", "late", "-"});
  EXPECT_EQ(waited.exit_code, kExitFailed);
  EXPECT_THAT(waited.err, HasSubstr("DEADLINE_EXCEEDED: no room for buffer 'late' (2 MiB) at "
                                    "host within 100ms"))
      << Describe(waited);
  // So do a get and a prefetch whose copy at the full host would wait.
  ASSERT_EQ(with({"put", "--location", "pinned", "src", "-"}).exit_code, 0);
  ProgramResult copy = with({"get", "--location", "host", "--wait-for-memory", "0.1", "src"});
  EXPECT_EQ(copy.exit_code, kExitFailed);
  EXPECT_THAT(copy.err, HasSubstr("DEADLINE_EXCEEDED: no room for a copy of buffer 'src' "
                                  "(2 MiB) at host within 100ms"))
      << Describe(copy);
  ProgramResult prefetch = with({"prefetch", "--wait-for-memory", "0.1", "src", "host"});
  EXPECT_EQ(prefetch.exit_code, kExitFailed);
  EXPECT_THAT(prefetch.err, HasSubstr("no room for a copy of buffer 'src'")) << Describe(prefetch);
  ProgramResult cp = with({"cp", "--location", "host", "--wait-for-memory", "0.1", "src", "dst"});
  EXPECT_EQ(cp.exit_code, kExitFailed);
  EXPECT_THAT(cp.err, HasSubstr("DEADLINE_EXCEEDED: no room for buffer 'dst' (2 MiB) at host "
                                "within 100ms"))
      << Describe(cp);
  // Only a copy may wait for memory: without --location, a usage error.
  ProgramResult here = with({"get", "--wait-for-memory", "1", "src"});
  EXPECT_EQ(here.exit_code, kExitUsage) << Describe(here);
  EXPECT_THAT(here.err, HasSubstr("--wait-for-memory needs --location"));
  // While a create waits, stats say where and for how much.
  auto client = Client::Connect({.socket_dir = (*small)->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Buffer> later = absl::UnknownError("not yet");
  std::thread waiter([&] {
    later = (*client)->Create("later", 2 << 20, {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] { return (*client)->Stats()->waits == 1; }));
  ProgramResult stats = with({"stats"});
  EXPECT_THAT(stats.out, HasSubstr("waiting for memory: host 1 call for 2 MiB")) << Describe(stats);
  ASSERT_EQ(with({"unlink", "p/0"}).exit_code, 0);
  waiter.join();
  EXPECT_TRUE(later.ok()) << later.status();
  EXPECT_THAT(with({"stats"}).out, Not(HasSubstr("waiting for memory")));
}

// Issue 29: get wrote binary to the terminal; as curl, it wants -o - first.
TEST_F(MemctlTest, GetRefusesToWriteToATerminalUnlessToldWithDashO) {
  Put("tty", "bytes for a terminal");
  ProgramResult refused =
      test::RunOnATerminal(Memctl(), {"--socket-dir", daemon_->socket_dir(), "get", "tty"});
  EXPECT_EQ(refused.exit_code, kExitUsage) << Describe(refused);
  EXPECT_THAT(refused.out, AllOf(HasSubstr("memctl: get tty: stdout is a terminal"),
                                 HasSubstr("or -o - to write them to the terminal anyway"),
                                 Not(HasSubstr("bytes for a terminal"))));
  ProgramResult told = test::RunOnATerminal(
      Memctl(), {"--socket-dir", daemon_->socket_dir(), "get", "tty", "-o", "-"});
  EXPECT_EQ(told.exit_code, 0) << Describe(told);
  EXPECT_THAT(told.out, HasSubstr("bytes for a terminal"));
}

TEST_F(MemctlTest, PutOfAnExistingNameFailsWithAlreadyExistsAndKeepsTheBytes) {
  Put("taken", "first");
  ExpectFailure(Run({"put", "taken", WriteFile("second", "second")}), "put taken",
                "ALREADY_EXISTS");
  ProgramResult get = Run({"get", "taken"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(get.out, "first");
}

TEST_F(MemctlTest, InvalidNamesAndLocationsFailWithInvalidArgument) {
  const std::string input = WriteFile("in", "data");
  ExpectFailure(Run({"put", "../escape", input}), "put ../escape", "INVALID_ARGUMENT");
  ExpectFailure(Run({"put", "has space", input}), "put has space", "INVALID_ARGUMENT");
  ExpectFailure(Run({"put", "ok", input, "--location", "nowhere"}), "put ok",
                "INVALID_ARGUMENT");
  ExpectFailure(Run({"inspect", "bad name"}), "inspect bad name", "INVALID_ARGUMENT");
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

TEST_F(MemctlTest, UsageErrorsExitTwoWithoutTouchingStdout) {
  const std::string input = WriteFile("in", "data");
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"bogus"},
      {"--bogus", "stats"},
      {"stats", "extra"},
      {"inspect"},
      {"unlink"},
      {"put", "only-name"},
      {"put", "x", input, "--mode", "999"},
      {"put", "x", input, "--mode", "rw"},
      {"get"},
      {"get", "x", "--wait", "-1"},
      {"get", "x", "--wait", "soon"},
      {"get", "x", "--json"},  // Bytes and JSON cannot share stdout.
      {"get", "x", "--owner", "no-such-user-of-memd"},
      {"get", "x", "--owner", "-1"},
      {"ls", "a", "b"},
      {"stats", "--watch", "0"},
      {"stats", "--watch", "soon"},
      {"stats", "--watch", "1", "--count", "0"},
      {"stats", "--count", "2"},  // Without --watch.
  };
  for (const auto& args : cases) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, kExitUsage)
        << "memctl " << absl::StrJoin(args, " ") << "\n" << Describe(result);
    EXPECT_THAT(result.out, IsEmpty()) << absl::StrJoin(args, " ");
    EXPECT_THAT(result.err, StartsWith("memctl: usage: INVALID_ARGUMENT: "))
        << absl::StrJoin(args, " ");
  }
  // None of them reached the daemon.
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

TEST_F(MemctlTest, HelpListsExamplesForEverySubcommand) {
  ProgramResult help = RunProgram(Memctl(), {"--help"});
  ASSERT_EQ(help.exit_code, 0) << Describe(help);
  EXPECT_THAT(help.out, HasSubstr("Examples:"));
  for (const std::string sub :
       {"stats", "ls", "inspect", "sessions", "put", "get", "unlink", "ping", "trim", "leaks"}) {
    EXPECT_THAT(help.out, HasSubstr("\n  " + sub + " ")) << sub;
    ProgramResult sub_help = RunProgram(Memctl(), {sub, "--help"});
    EXPECT_EQ(sub_help.exit_code, 0) << Describe(sub_help);
    EXPECT_THAT(sub_help.out, AllOf(HasSubstr("Examples:"), HasSubstr("memctl " + sub),
                                    HasSubstr("--json")))
        << sub;
  }
}

TEST_F(MemctlTest, NoDaemonExitsOneWithUnavailableNamingTheSocketDir) {
  TempDir nothing;
  for (const std::string sub : {"ping", "ls", "stats"}) {
    ProgramResult result = RunProgram(Memctl(), {"--socket-dir", nothing.path(), sub});
    ExpectFailure(result, "connect to memd at " + nothing.path(), "UNAVAILABLE");
    EXPECT_THAT(result.err, HasSubstr(nothing.path() + "/session.sock"));
  }
}

TEST_F(MemctlTest, EmptyInputIsRefusedAndLeavesNoBuffer) {
  ProgramResult file = Run({"put", "empty", WriteFile("empty", "")});
  ExpectFailure(file, "put empty", "INVALID_ARGUMENT");
  EXPECT_THAT(file.err, HasSubstr("at least 1 byte"));

  ProgramResult stdin_pipe = Run({"put", "empty", "-"}, "");
  ExpectFailure(stdin_pipe, "put empty", "INVALID_ARGUMENT");
  EXPECT_THAT(stdin_pipe.err, HasSubstr("stdin is empty"));

  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

TEST_F(MemctlTest, UnreadableInputFailsNamingTheFile) {
  const std::string missing = files_.Join("missing");
  ExpectFailure(Run({"put", "x", missing}), "read " + missing, "NOT_FOUND");
  ExpectFailure(Run({"put", "x", files_.path()}), "read " + files_.path(),
                "INVALID_ARGUMENT");
  if (::geteuid() != 0) {  // root reads anything.
    const std::string secret = WriteFile("secret", "s");
    ASSERT_EQ(::chmod(secret.c_str(), 0), 0);
    ExpectFailure(Run({"put", "x", secret}), "read " + secret, "PERMISSION_DENIED");
  }
  EXPECT_EQ(RunJson({"ls", "--json"}), Json::array());
}

TEST_F(MemctlTest, GetToAnUnwritableFileFailsAndSaysWhere) {
  Put("src", "data");
  const std::string target = files_.Join("no/such/dir/out");
  ExpectFailure(Run({"get", "src", "-o", target}), "write " + target, "NOT_FOUND");
}

TEST_F(MemctlTest, GetWaitsForTheSealOnlyWhenAsked) {
  auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  auto buffer = (*client)->Create("pending", 5);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memcpy(buffer->mutable_data().data(), "ready", 5);

  ExpectFailure(Run({"get", "pending"}), "get pending", "FAILED_PRECONDITION");
  ExpectFailure(Run({"get", "pending", "--wait", "0.2"}), "get pending",
                "DEADLINE_EXCEEDED");

  ASSERT_TRUE(buffer->Seal().ok());
  ProgramResult get = Run({"get", "--wait", "5", "pending"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(get.out, "ready");
}

TEST_F(MemctlTest, SocketDirComesFromTheEnvironment) {
  const std::map<std::string, std::string> env = {
      {"MEMD_SOCKET_DIR", daemon_->socket_dir()}};
  ProgramResult ping = RunProgram(Memctl(), {"ping"}, "", env);
  ASSERT_EQ(ping.exit_code, 0) << Describe(ping);
  EXPECT_THAT(ping.out, HasSubstr(daemon_->socket_dir()));

  ProgramResult put = RunProgram(Memctl(), {"put", "env/x", "-"}, "via env", env);
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  // The flag wins over the environment.
  ProgramResult ls = RunProgram(Memctl(), {"ls", "--socket-dir", daemon_->socket_dir()},
                                "", {{"MEMD_SOCKET_DIR", files_.path()}});
  ASSERT_EQ(ls.exit_code, 0) << Describe(ls);
  EXPECT_THAT(ls.out, HasSubstr("env/x"));
}

TEST_F(MemctlTest, PingJsonNamesTheSocketDir) {
  Json json = RunJson({"ping", "--json"});
  EXPECT_EQ(json.at("socket_dir"), daemon_->socket_dir());
  EXPECT_GT(json.at("session_id").get<std::uint64_t>(), 0u);
  EXPECT_GE(json.at("round_trip_ns").get<std::int64_t>(), 0);
}

}  // namespace
}  // namespace memd::memctl_test
