// memctl cp end to end, and the copy reports of put and get: a real memd
// (host backend) per test, the real memctl, and what an operator or a
// script sees (stdout, stderr, exit code, the bytes).

#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

class MemctlCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start();
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  ProgramResult Run(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {"--socket-dir", daemon_->socket_dir()});
    return RunProgram(BinDir() + "/memctl", args, input);
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = files_.Join(name);
    WriteWholeFile(path, bytes);
    return path;
  }

  void Put(const std::string& name, const std::string& bytes) {
    ProgramResult put = Run({"put", name, WriteFile("put.in", bytes)});
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
  }

  std::string Get(const std::string& name) {
    ProgramResult get = Run({"get", name});
    EXPECT_EQ(get.exit_code, 0) << Describe(get);
    return get.out;
  }

  Json RunJson(const std::vector<std::string>& args) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, 0) << Describe(result);
    // Not a terminal: no progress bar, nothing on stderr.
    EXPECT_THAT(result.err, IsEmpty());
    Json json = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << "not JSON: " << result.out;
    return json;
  }

  std::vector<std::string> Names() {
    std::vector<std::string> names;
    auto listed = client_->List();
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) {
      for (const BufferInfo& info : *listed) names.push_back(info.name);
    }
    return names;
  }

  TempDir files_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

void ExpectFailure(const ProgramResult& result, const std::string& step,
                   const std::string& code) {
  EXPECT_EQ(result.exit_code, kExitFailed) << Describe(result);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, StartsWith(absl::StrCat("memctl: ", step, ": ", code, ": ")))
      << Describe(result);
}

// Issue 29: `memctl cp o/x o.txt` made a buffer named o.txt although
// ./o.txt existed.
TEST_F(MemctlCopyTest, AnOperandThatExistsHereIsAFileAndBufNamesABuffer) {
  Put("o/x", "the buffer's bytes");
  WriteFile("o.txt", "the file's bytes");
  // memctl run in the directory that holds o.txt.
  auto cp_here = [&](const std::string& source, const std::string& destination) {
    return RunProgram("/bin/sh",
                      {"-c", absl::StrCat("cd ", files_.path(), " && exec ", BinDir(),
                                          "/memctl --socket-dir ", daemon_->socket_dir(),
                                          " cp ", source, " ", destination)});
  };
  ProgramResult to_file = cp_here("o/x", "o.txt");
  ASSERT_EQ(to_file.exit_code, 0) << Describe(to_file);
  EXPECT_EQ(test::ReadWholeFile(files_.Join("o.txt")), "the buffer's bytes");
  EXPECT_FALSE(client_->Stat("o.txt").ok()) << "no buffer o.txt";

  ProgramResult to_buffer = cp_here("o/x", "buf:o.txt");
  ASSERT_EQ(to_buffer.exit_code, 0) << Describe(to_buffer);
  EXPECT_THAT(to_buffer.out, StartsWith("cp o/x -> o.txt: "));
  EXPECT_EQ(Get("o.txt"), "the buffer's bytes");

  WriteFile("o.txt", "the file again");
  ProgramResult from_file = cp_here("o.txt", "o/y");
  ASSERT_EQ(from_file.exit_code, 0) << Describe(from_file);
  EXPECT_EQ(Get("o/y"), "the file again");
  // A path on both sides is no buffer copy.
  EXPECT_EQ(cp_here("o.txt", "./p.txt").exit_code, kExitUsage);
}

TEST_F(MemctlCopyTest, CpBufferToANewBufferCopiesAndSealsIt) {
  const std::string bytes = RandomBytes((std::size_t{5} << 20) + 123, 1);
  Put("src", bytes);
  ProgramResult cp = Run({"cp", "src", "copy/dst"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  EXPECT_THAT(cp.out, AllOf(StartsWith("cp src -> copy/dst: "), HasSubstr("5 MiB in ")));
  EXPECT_THAT(cp.err, IsEmpty());
  auto info = client_->Stat("copy/dst");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, bytes.size());
  EXPECT_EQ(info->state, BufferState::kSealed);
  EXPECT_EQ(info->location, "host");
  EXPECT_EQ(info->persistence, Persistence::kPersistent);
  EXPECT_TRUE(Get("copy/dst") == bytes) << "the copy differs";
  EXPECT_TRUE(Get("src") == bytes) << "the source changed";
}

// A copy reads as its source does: a new DST carries SRC's attributes.
TEST_F(MemctlCopyTest, CpGivesANewDestinationTheSourcesAttributes) {
  ProgramResult put = Run({"put", "--attr", "dtype=int8", "--attr", "shape=3", "src",
                           WriteFile("put.in", "abc")});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  ProgramResult cp = Run({"cp", "src", "dst"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  auto info = client_->Stat("dst");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->attrs, (std::map<std::string, std::string>{{"dtype", "int8"}, {"shape", "3"}}));
}

TEST_F(MemctlCopyTest, CpTakesLocationModeAndEphemeralForANewDestination) {
  Put("src", "pinned bytes");
  ProgramResult cp =
      Run({"cp", "--location", "pinned", "--mode", "0640", "src", "dst"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  auto info = client_->Stat("dst");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->location, "pinned");
  EXPECT_EQ(info->mode, 0640u);
  EXPECT_EQ(Get("dst"), "pinned bytes");
  // Ephemeral: gone with memctl's lease, as nobody else held one.
  ProgramResult ephemeral = Run({"cp", "--ephemeral", "src", "passing"});
  ASSERT_EQ(ephemeral.exit_code, 0) << Describe(ephemeral);
  EXPECT_EQ(client_->Stat("passing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MemctlCopyTest, CpIntoABufferBeingWrittenFillsItsStartAndSealsUnlessTold) {
  Put("src", "new head");
  auto held = client_->Create("slot", 16);
  ASSERT_TRUE(held.ok()) << held.status();
  std::memset(held->mutable_data().data(), '.', 16);
  ProgramResult cp = Run({"cp", "--no-seal", "src", "slot"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  EXPECT_THAT(cp.out, HasSubstr("not sealed"));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(held->data().data()), 16),
            "new head........");
  EXPECT_EQ(client_->Stat("slot")->state, BufferState::kCreating);

  ProgramResult sealing = Run({"cp", "src", "slot"});
  ASSERT_EQ(sealing.exit_code, 0) << Describe(sealing);
  EXPECT_EQ(client_->Stat("slot")->state, BufferState::kSealed);
}

TEST_F(MemctlCopyTest, CpFileToBufferToFileRoundTripsOddSizes) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (std::size_t size : {std::size_t{1}, page - 1, page + 1, (std::size_t{4} << 20) + 17,
                           (std::size_t{33} << 20) + 4097}) {
    SCOPED_TRACE(size);
    const std::string bytes = RandomBytes(size, static_cast<unsigned>(size));
    const std::string name = absl::StrCat("rt/", size);
    ProgramResult in = Run({"cp", WriteFile("in", bytes), name});
    ASSERT_EQ(in.exit_code, 0) << Describe(in);
    EXPECT_EQ(client_->Stat(name)->state, BufferState::kSealed);
    const std::string out = files_.Join("out");
    ProgramResult back = Run({"cp", name, out});
    ASSERT_EQ(back.exit_code, 0) << Describe(back);
    EXPECT_TRUE(ReadWholeFile(out) == bytes) << "the round trip differs";
  }
}

TEST_F(MemctlCopyTest, CpStreamsThroughStdinAndStdout) {
  const std::string bytes = RandomBytes(300000, 5);  // More than a pipe holds.
  ProgramResult in = Run({"cp", "-", "piped"}, bytes);
  ASSERT_EQ(in.exit_code, 0) << Describe(in);
  ProgramResult out = Run({"cp", "piped", "-"});
  ASSERT_EQ(out.exit_code, 0) << Describe(out);
  EXPECT_TRUE(out.out == bytes) << "stdout differs";
  EXPECT_THAT(out.err, IsEmpty());
}

TEST_F(MemctlCopyTest, CpOfAnEmptyFileIsRefusedAndLeavesNoBuffer) {
  ProgramResult empty = Run({"cp", WriteFile("empty", ""), "nothing"});
  EXPECT_EQ(empty.exit_code, kExitFailed) << Describe(empty);
  EXPECT_THAT(empty.err, AllOf(HasSubstr("INVALID_ARGUMENT"), HasSubstr("is empty"),
                               HasSubstr("at least 1 byte")));
  EXPECT_THAT(Names(), IsEmpty());
}

TEST_F(MemctlCopyTest, CpJsonReportsBytesTimeRatePathAndRetries) {
  const std::string bytes = RandomBytes(3 << 20, 9);
  Put("src", bytes);
  Json json = RunJson({"cp", "--json", "src", "dst"});
  EXPECT_EQ(json.at("bytes"), bytes.size());
  EXPECT_GE(json.at("seconds").get<double>(), 0.0);
  EXPECT_GE(json.at("gb_per_s").get<double>(), 0.0);
  EXPECT_EQ(json.at("path"), "cpu");  // Host to host.
  EXPECT_EQ(json.at("retries"), 0);
  EXPECT_EQ(json.at("source"), "src");
  EXPECT_EQ(json.at("destination"), "dst");
  EXPECT_EQ(json.at("sealed"), true);

  const std::string file = WriteFile("in", bytes);
  Json from_file = RunJson({"cp", file, "dst2", "--json"});
  EXPECT_EQ(from_file.at("source"), file);
  EXPECT_EQ(from_file.at("bytes"), bytes.size());
  // A regular file into a host buffer goes through the buffer's descriptor.
  EXPECT_EQ(from_file.at("file_io"), "sendfile");
  EXPECT_EQ(Get("dst2"), bytes);
}

TEST_F(MemctlCopyTest, PutAndGetJsonAddTheCopyReport) {
  const std::string bytes = RandomBytes(70000, 4);
  const std::string file = WriteFile("in", bytes);
  Json put = RunJson({"put", "--json", "p", file});
  EXPECT_EQ(put.at("name"), "p");  // The buffer's fields stay...
  EXPECT_EQ(put.at("state"), "sealed");
  EXPECT_EQ(put.at("bytes"), bytes.size());  // ...and the copy's join them.
  EXPECT_EQ(put.at("source"), file);
  EXPECT_EQ(put.at("destination"), "p");
  EXPECT_EQ(put.at("path"), "cpu");
  for (const char* field : {"seconds", "gb_per_s", "retries", "file_io"}) {
    EXPECT_TRUE(put.contains(field)) << field;
  }
  const std::string out = files_.Join("out");
  Json get = RunJson({"get", "--json", "p", "-o", out});
  EXPECT_EQ(get.at("size_bytes"), bytes.size());
  EXPECT_EQ(get.at("bytes"), bytes.size());
  EXPECT_EQ(get.at("destination"), out);
  EXPECT_TRUE(ReadWholeFile(out) == bytes);
}

TEST_F(MemctlCopyTest, EveryPriorityIsAcceptedAndAnUnknownOneIsAUsageError) {
  Put("src", "prioritised");
  for (const char* priority : {"critical", "normal", "background"}) {
    const std::string name = absl::StrCat("p/", priority);
    ProgramResult cp = Run({"cp", "--priority", priority, "src", name});
    EXPECT_EQ(cp.exit_code, 0) << priority << "\n" << Describe(cp);
    EXPECT_EQ(Get(name), "prioritised") << priority;
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"cp", "--priority", "urgent", "src", "x"},
                                             {"put", "--priority", "", "x", "/dev/null"},
                                             {"get", "src", "--priority", "HIGH"}}) {
    ProgramResult refused = Run(args);
    EXPECT_EQ(refused.exit_code, kExitUsage) << Describe(refused);
    EXPECT_THAT(refused.err, AllOf(StartsWith("memctl: usage: INVALID_ARGUMENT: "),
                                   HasSubstr("critical, normal or background")))
        << absl::StrJoin(args, " ");
  }
}

TEST_F(MemctlCopyTest, CpUsageErrorsExitTwoBeforeTouchingTheDaemon) {
  const std::string file = WriteFile("in", "data");
  const std::vector<std::vector<std::string>> cases = {
      {"cp"},
      {"cp", "only-source"},
      {"cp", file, files_.Join("other")},  // cp(1)'s job.
      {"cp", "-", "-"},
      {"cp", "--json", "src", "-"},  // Bytes and JSON cannot share stdout.
      {"cp", "src", "dst", "--timeout", "0"},
      {"cp", "src", "dst", "--timeout", "soon"},
      {"cp", "src", "dst", "--chunk-size", "0"},
      {"cp", "src", "dst", "--mode", "rw"},
      {"cp", "a", "b", "c"},
  };
  for (const auto& args : cases) {
    ProgramResult result = Run(args);
    EXPECT_EQ(result.exit_code, kExitUsage)
        << absl::StrJoin(args, " ") << "\n" << Describe(result);
    EXPECT_THAT(result.out, IsEmpty());
    EXPECT_THAT(result.err, StartsWith("memctl: usage: INVALID_ARGUMENT: "))
        << absl::StrJoin(args, " ");
  }
  ProgramResult files = Run({"cp", file, files_.Join("other")});
  EXPECT_THAT(files.err, HasSubstr("use cp(1)"));
  EXPECT_THAT(Names(), IsEmpty());
}

TEST_F(MemctlCopyTest, CpFromAMissingSourceFailsNamingItAndCreatesNothing) {
  ExpectFailure(Run({"cp", "missing", "dst"}), "cp missing dst: source", "NOT_FOUND");
  const std::string file = files_.Join("missing.bin");
  ExpectFailure(Run({"cp", file, "dst"}), "read " + file, "NOT_FOUND");
  ExpectFailure(Run({"cp", "missing", files_.Join("out")}), "cp missing " + files_.Join("out"),
                "NOT_FOUND");
  EXPECT_THAT(Names(), IsEmpty());
}

TEST_F(MemctlCopyTest, CpIntoASealedOrTooSmallDestinationFailsAndKeepsIt) {
  Put("src", "twelve bytes");
  Put("sealed", "old");
  ProgramResult sealed = Run({"cp", "src", "sealed"});
  ExpectFailure(sealed, "cp src sealed: destination", "FAILED_PRECONDITION");
  EXPECT_THAT(sealed.err, HasSubstr("sealed"));
  EXPECT_EQ(Get("sealed"), "old");

  auto small = client_->Create("small", 4);
  ASSERT_TRUE(small.ok()) << small.status();
  ProgramResult too_small = Run({"cp", "src", "small"});
  ExpectFailure(too_small, "cp src small: destination", "INVALID_ARGUMENT");
  EXPECT_THAT(too_small.err, HasSubstr("holds 4 bytes, fewer than the 12 of src"));
  ASSERT_TRUE(client_->Stat("small").ok()) << "someone else's buffer stays";

  ProgramResult file_too_big = Run({"cp", WriteFile("big", "twelve bytes"), "small"});
  EXPECT_EQ(file_too_big.exit_code, kExitFailed) << Describe(file_too_big);
  EXPECT_THAT(file_too_big.err, AllOf(HasSubstr("INVALID_ARGUMENT"),
                                      HasSubstr("holds only 4")));
  ASSERT_TRUE(client_->Stat("small").ok());
}

TEST_F(MemctlCopyTest, CpTimeoutAndChunkSizeReachTheDaemon) {
  Put("src", RandomBytes(2 << 20, 3));
  ProgramResult ok = Run({"cp", "--timeout", "60", "--chunk-size", "1MiB", "src", "dst"});
  ASSERT_EQ(ok.exit_code, 0) << Describe(ok);
  // The daemon decides which chunk sizes it takes: 1 MiB up to its slot.
  ProgramResult tiny = Run({"cp", "--chunk-size", "4KiB", "src", "dst2"});
  ExpectFailure(tiny, "cp src dst2", "INVALID_ARGUMENT");
  EXPECT_EQ(client_->Stat("dst2").status().code(), absl::StatusCode::kNotFound)
      << "a failed cp unlinks the buffer it created";
}

TEST_F(MemctlCopyTest, HelpExplainsCpOperandsAndDestinations) {
  ProgramResult help = RunProgram(BinDir() + "/memctl", {"cp", "--help"});
  ASSERT_EQ(help.exit_code, 0) << Describe(help);
  EXPECT_THAT(help.out, AllOf(HasSubstr("/, ./ or ../"), HasSubstr("--no-seal"),
                              HasSubstr("--priority"), HasSubstr("--location"),
                              HasSubstr("SRC's location"), HasSubstr("Examples:")));
  ProgramResult main_help = RunProgram(BinDir() + "/memctl", {"--help"});
  EXPECT_THAT(main_help.out, HasSubstr("\n  cp "));
}

}  // namespace
}  // namespace memd
