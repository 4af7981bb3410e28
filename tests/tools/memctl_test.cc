// memctl end to end: a real memd per test, the real memctl binary, and
// assertions on what an operator or a script would see (stdout, stderr,
// exit code).

#include <sys/stat.h>
#include <unistd.h>

#include <iterator>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bytes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tools/clidoc/pages.h"
#include "tools/memctl/cli_subcommands.h"
#include "tests/support/cli_docs.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::memd::test::BinDir;
using ::memd::test::DaemonProcess;
using ::memd::test::Describe;
using ::memd::test::ProgramResult;
using ::memd::test::RandomBytes;
using ::memd::test::ReadWholeFile;
using ::memd::test::RunProgram;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

std::string Memctl() { return BinDir() + "/memctl"; }

// Every byte value, several times over and in both orders.
std::string AllByteValues() {
  std::string bytes;
  for (int round = 0; round < 3; ++round) {
    for (int value = 0; value < 256; ++value) bytes.push_back(static_cast<char>(value));
    for (int value = 255; value >= 0; --value) bytes.push_back(static_cast<char>(value));
  }
  return bytes;
}

class MemctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start();
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  // memctl --socket-dir <the daemon's> args...
  ProgramResult Run(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {"--socket-dir", daemon_->socket_dir()});
    return RunProgram(Memctl(), args, input);
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = files_.Join(name);
    WriteWholeFile(path, bytes);
    return path;
  }

  // Publishes `bytes` under `name` through `memctl put`.
  void Put(const std::string& name, const std::string& bytes,
           std::vector<std::string> options = {}) {
    std::vector<std::string> args = {"put", name, WriteFile("put.in", bytes)};
    args.insert(args.end(), options.begin(), options.end());
    ProgramResult result = Run(args);
    ASSERT_EQ(result.exit_code, 0) << Describe(result);
  }

  // stdout of a successful run as JSON.
  Json RunJson(const std::vector<std::string>& args) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    EXPECT_THAT(result.err, IsEmpty());
    Json json = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << "not JSON: " << result.out;
    return json;
  }

  // A client of this process's (pid getpid()) and the read lease it holds
  // on `name`, until it goes (the lease first).
  struct Holder {
    std::unique_ptr<Client> client;
    std::optional<Buffer> lease;
  };
  Holder HoldLease(const std::string& name) {
    Holder holder;
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return holder;
    holder.client = std::move(*client);
    auto lease = holder.client->Open(name);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (lease.ok()) holder.lease.emplace(std::move(*lease));
    return holder;
  }

  // The "host" entry of `memctl stats --json`.
  static Json HostPool(const Json& stats) {
    for (const Json& pool : stats.at("pools")) {
      if (pool.at("location") == "host") return pool;
    }
    ADD_FAILURE() << "no host pool in " << stats.dump();
    return Json::object();
  }

  TempDir files_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// A failed operation: exit 1, nothing on stdout, one line on stderr that
// names the step and the status code.
void ExpectFailure(const ProgramResult& result, const std::string& step,
                   const std::string& code) {
  EXPECT_EQ(result.exit_code, kExitFailed) << Describe(result);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, StartsWith(absl::StrCat("memctl: ", step, ": ", code, ": ")))
      << Describe(result);
}

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

// memctl's man page and completions (tools/clidoc), written from the App
// memctl parses: every subcommand and option in them, walked here with
// CLI11's own accessors (tests/support/cli_docs.h). No daemon needed.
class MemctlDocsTest : public ::testing::Test {
 protected:
  const clidoc::Program memctl_ = clidoc::Memctl();
  const CLI::App& app_ = *memctl_.app;
};

TEST_F(MemctlDocsTest, ManPageHasEverySubcommandAndOptionAndRendersWithoutWarnings) {
  // The walk sees every subcommand memctl declares.
  std::vector<test::CliItem> items = test::CliItems(app_);
  EXPECT_EQ(std::count_if(items.begin(), items.end(),
                          [](const test::CliItem& item) {
                            return item.kind == test::CliItem::Kind::kSubcommand;
                          }),
            std::ssize(memctl::Subcommands()));
  const std::string page = clidoc::ManPage(app_, memctl_.page);
  EXPECT_THAT(test::ManPageProblems(app_, page), IsEmpty());
  for (const char* section : {".SH NAME\nmemctl \\- ", ".SH SYNOPSIS", ".SH DESCRIPTION",
                              ".SH OPTIONS", ".SH COMMANDS", ".SH ENVIRONMENT", ".SH FILES",
                              ".SH \"EXIT STATUS\"", ".SH \"SEE ALSO\""}) {
    EXPECT_THAT(page, HasSubstr(section));
  }
  // --socket-dir's environment variable, from the option itself.
  EXPECT_THAT(page, HasSubstr(".TP\n\\fBMEMD_SOCKET_DIR\\fR\n"));
}

TEST_F(MemctlDocsTest, BashCompletesEverySubcommandAndOption) {
  EXPECT_THAT(test::BashCompletionProblems(app_, clidoc::BashCompletion(app_)), IsEmpty());
}

TEST_F(MemctlDocsTest, BashCompletesPrefixesChoicesAndFiles) {
  TempDir dir;
  WriteWholeFile(dir.Join("weights.bin"), "w");
  std::vector<std::vector<std::string>> replies = test::BashCompletions(
      clidoc::BashCompletion(app_), "memctl",
      {{"memctl", "st"},
       {"memctl", "put", "--ret"},
       {"memctl", "put", "--retention", "e"},
       {"memctl", "--socket-dir", "/run/memd", "--json", "pi"},
       {"memctl", "stats", "--js"},  // --json of memctl itself, after the subcommand
       {"memctl", "put", "w", dir.Join("wei")},
       {"memctl", "get", "--output", dir.Join("w")},
       {"memctl", "put", "--mode", ""}});
  EXPECT_THAT(replies[0], ElementsAre("stats"));
  EXPECT_THAT(replies[1], ElementsAre("--retention"));
  EXPECT_THAT(replies[2], ElementsAre("evictable"));
  EXPECT_THAT(replies[3], ElementsAre("ping"));
  EXPECT_THAT(replies[4], ElementsAre("--json"));
  EXPECT_THAT(replies[5], ElementsAre(dir.Join("weights.bin")));
  EXPECT_THAT(replies[6], ElementsAre(dir.Join("weights.bin")));
  EXPECT_THAT(replies[7], IsEmpty()) << "a mode is typed, not chosen from subcommands";
}

TEST_F(MemctlDocsTest, ZshCompletionPassesEverySubcommandAndOption) {
  EXPECT_THAT(test::ZshCompletionProblems(app_, clidoc::ZshCompletion(app_)), IsEmpty());
}

}  // namespace
}  // namespace memd
