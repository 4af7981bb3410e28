// memctl and device buffers on the fake CUDA driver (tests/fake_cuda): put
// and get stream files through memctl's staging buffer and the daemon's
// transfer engine, cp moves bytes between host and device buffers, and a
// terminal sees a progress bar.

#include <fcntl.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::memd::test::BinDir;
using ::memd::test::DaemonProcess;
using ::memd::test::Describe;
using ::memd::test::ProgramResult;
using ::memd::test::CachedBytes;
using ::memd::test::RandomBytes;
using ::memd::test::ReadWholeFile;
using ::memd::test::RunProgram;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr int kExitFailed = 1;

class MemctlDeviceTest : public ::testing::Test {
 protected:
  // memd on the fake driver; `fake_env` (MEMD_FAKE_CUDA_*) configures the
  // daemon's fake: its link, its faults.
  void StartDaemon(std::vector<std::pair<std::string, std::string>> fake_env = {},
                   std::vector<std::string> args = {}) {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    args.insert(args.begin(), {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
    auto daemon = DaemonProcess::StartWithEnvironment(args, {fake_env.begin(), fake_env.end()});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    for (const auto& [key, value] : fake_env) {
      if (key == "MEMD_FAKE_CUDA_DEVICES") fake_env_[key] = value;
    }
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // memctl's own fake sees as many GPUs as the daemon's.
  std::map<std::string, std::string> Environment() const {
    std::map<std::string, std::string> env = {{"MEMD_SOCKET_DIR", daemon_->socket_dir()},
                                              {"MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH}};
    env.insert(fake_env_.begin(), fake_env_.end());
    return env;
  }

  ProgramResult Run(const std::vector<std::string>& args, const std::string& input = "") {
    return RunProgram(BinDir() + "/memctl", args, input, Environment(), absl::Seconds(120));
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) {
    const std::string path = files_.Join(name);
    WriteWholeFile(path, bytes);
    return path;
  }

  // The bytes of buffer `name`, read back through memctl get.
  std::string Get(const std::string& name) {
    const std::string out = files_.Join("get.out");
    ProgramResult get = Run({"get", name, "-o", out});
    EXPECT_EQ(get.exit_code, 0) << Describe(get);
    return ReadWholeFile(out);
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
  std::map<std::string, std::string> fake_env_;  // The GPU count, when given.
};

TEST_F(MemctlDeviceTest, PutAndGetRoundTripFilesOfAnySizeThroughStaging) {
  StartDaemon();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // One byte; around a page; not a multiple of a chunk; more than one
  // 32 MiB staging slice (ReadFlagsRoundTripAFileThatCyclesTheStaging
  // reuses every slice).
  for (std::size_t size : {std::size_t{1}, page - 1, page + 1, (std::size_t{5} << 20) + 123,
                           (std::size_t{50} << 20) + 4097}) {
    SCOPED_TRACE(size);
    const std::string bytes = RandomBytes(size, static_cast<unsigned>(size));
    const std::string name = absl::StrCat("w/", size);
    ProgramResult put =
        Run({"put", "--json", "--location", "device:0", name, WriteFile("in", bytes)});
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
    EXPECT_THAT(put.err, IsEmpty()) << "no progress bar without a terminal";
    Json json = Json::parse(put.out);
    EXPECT_EQ(json.at("location"), "device:0");
    EXPECT_EQ(json.at("state"), "sealed");
    EXPECT_EQ(json.at("bytes"), size);
    EXPECT_THAT(json.at("path").get<std::string>(), AnyOf(Eq("direct"), Eq("staged")));
    EXPECT_THAT(json.at("file_io").get<std::string>(), AnyOf(Eq("direct"), Eq("buffered")));
    EXPECT_TRUE(Get(name) == bytes) << "the round trip differs";
  }
  // memctl's staging buffers went with it.
  for (const std::string& name : Names()) EXPECT_THAT(name, StartsWith("w/"));
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->transfers.active, 0u);
  EXPECT_EQ(stats->transfers.failed, 0u);
}

TEST_F(MemctlDeviceTest, PutWithoutDirectIoAndFromPipesFillsDeviceBuffers) {
  StartDaemon();
  const std::string bytes = RandomBytes((std::size_t{3} << 20) + 7, 8);
  ProgramResult buffered = Run({"put", "--json", "--no-direct-io", "--location", "device:0",
                                "buffered", WriteFile("in", bytes)});
  ASSERT_EQ(buffered.exit_code, 0) << Describe(buffered);
  EXPECT_EQ(Json::parse(buffered.out).at("file_io"), "buffered");
  EXPECT_TRUE(Get("buffered") == bytes);

  // A pipe of unknown size is collected first (bounded), then staged.
  ProgramResult piped = Run({"put", "--location", "device:0", "piped", "-"}, bytes);
  ASSERT_EQ(piped.exit_code, 0) << Describe(piped);
  EXPECT_TRUE(Get("piped") == bytes);
  // With --size it streams: slice by slice, exactly that many bytes.
  ProgramResult sized = Run({"put", "--location", "device:0", "--size",
                             absl::StrCat(bytes.size()), "sized", "-"},
                            bytes);
  ASSERT_EQ(sized.exit_code, 0) << Describe(sized);
  EXPECT_TRUE(Get("sized") == bytes);
  ProgramResult short_pipe = Run({"put", "--location", "device:0", "--size",
                                  absl::StrCat(bytes.size() + 1), "short", "-"},
                                 bytes);
  EXPECT_EQ(short_pipe.exit_code, kExitFailed) << Describe(short_pipe);
  EXPECT_THAT(short_pipe.err, HasSubstr("--size promised"));
  EXPECT_EQ(client_->Stat("short").status().code(), absl::StatusCode::kNotFound);
}

// A file larger than memctl's staging (8 slices of 32 MiB), so that every
// slice is read again, with an odd tail: mostly a hole (cheap to write and
// to read), with different bytes every 64 KiB.
std::string WriteLargeFile(const std::string& path, std::string& bytes) {
  bytes.assign((std::size_t{300} << 20) + 12345, '\0');
  for (std::size_t at = 0; at + 16 <= bytes.size(); at += 64 << 10) {
    const std::string mark = absl::StrCat("@", at, "#");
    bytes.replace(at, mark.size(), mark);
  }
  bytes.replace(bytes.size() - 5, 5, "tail!");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes.size())), 0);
  for (std::size_t at = 0; at < bytes.size(); at += 64 << 10) {
    const std::size_t length = std::min<std::size_t>(16, bytes.size() - at);
    EXPECT_EQ(::pwrite(fd, bytes.data() + at, length, static_cast<off_t>(at)),
              static_cast<ssize_t>(length));
  }
  EXPECT_EQ(::pwrite(fd, bytes.data() + bytes.size() - 5, 5,
                     static_cast<off_t>(bytes.size() - 5)),
            5);
  ::close(fd);
  return path;
}

// Whether the filesystem under `dir` takes O_DIRECT.
bool AllowsDirectIo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST_F(MemctlDeviceTest, ReadFlagsRoundTripAFileThatCyclesTheStaging) {
  StartDaemon();
  std::string bytes;
  const std::string path = WriteLargeFile(files_.Join("large"), bytes);
  const bool direct_allowed = AllowsDirectIo(path);
  struct Case {
    std::vector<std::string> flags;
    std::string file_io;
  };
  const std::vector<Case> cases = {
      {{"--no-direct-io", "--read-threads", "16", "--cache", "drop"}, "buffered"},
      {{"--direct-io", "--cache", "keep", "--read-threads", "3"}, "direct"},
  };
  int round = 0;
  for (const Case& test : cases) {
    SCOPED_TRACE(testing::PrintToString(test.flags));
    if (test.file_io == "direct" && !direct_allowed) continue;
    const std::string name = absl::StrCat("large/", round++);
    std::vector<std::string> args = {"put", "--json", "--location", "device:0"};
    args.insert(args.end(), test.flags.begin(), test.flags.end());
    args.insert(args.end(), {name, path});
    ProgramResult put = Run(args);
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
    Json json = Json::parse(put.out);
    EXPECT_EQ(json.at("bytes"), bytes.size());
    if (!test.file_io.empty()) {
      EXPECT_EQ(json.at("file_io"), test.file_io);
    }
    EXPECT_TRUE(Get(name) == bytes) << "the round trip differs";
    ASSERT_EQ(Run({"unlink", name}).exit_code, 0);
  }
  // cp from a file takes the same flags; one thread reads in order.
  const std::string small = RandomBytes((std::size_t{5} << 20) + 3, 12);
  ProgramResult cp = Run({"cp", "--json", "--read-threads", "1", "--no-direct-io",
                          WriteFile("small", small), "small", "--location", "device:0"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  EXPECT_EQ(Json::parse(cp.out).at("file_io"), "buffered");
  EXPECT_TRUE(Get("small") == small);
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->transfers.active, 0u);
  EXPECT_EQ(stats->transfers.failed, 0u);
}

// Bytes of the file's first `size` the page cache holds.

TEST_F(MemctlDeviceTest, CacheDropLeavesTheFileOutOfThePageCache) {
  struct statfs fs {};
  ASSERT_EQ(::statfs(files_.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs pages are the file: nothing to drop";
  StartDaemon();
  // Whole 8 MiB pieces: the page cache drops a large folio only when the
  // advice covers all of it.
  const std::size_t size = std::size_t{40} << 20;
  const std::string path = WriteFile("cached", RandomBytes(size, 11));
  {
    // Written back first: the page cache drops clean pages only.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(::fdatasync(fd), 0);
    ::close(fd);
  }
  for (const std::string location : {"device:0", "host"}) {
    SCOPED_TRACE(location);
    const std::string tag = location == "host" ? "host" : "device";
    // Cached first (written, then read): --no-direct-io reads the cache.
    ProgramResult keep = Run({"put", "--no-direct-io", "--location", location,
                              absl::StrCat("keep-", tag), path});
    ASSERT_EQ(keep.exit_code, 0) << Describe(keep);
    EXPECT_EQ(CachedBytes(path, size), size);
    ProgramResult drop = Run({"put", "--no-direct-io", "--cache", "drop", "--location",
                              location, absl::StrCat("drop-", tag), path});
    ASSERT_EQ(drop.exit_code, 0) << Describe(drop);
    EXPECT_EQ(CachedBytes(path, size), 0u);
    // Cached again for the next round.
    EXPECT_EQ(ReadWholeFile(path).size(), size);
  }
}

TEST_F(MemctlDeviceTest, BadReadFlagsAreUsageErrorsThatSayWhatWould) {
  StartDaemon();
  const std::string path = WriteFile("in", "bytes");
  for (const std::string threads : {"0", "-1", "17", "100000000000", "two"}) {
    ProgramResult put =
        Run({"put", "--read-threads", threads, "--location", "device:0", "t", path});
    EXPECT_EQ(put.exit_code, 2) << threads << ": " << Describe(put);
    EXPECT_THAT(put.err, HasSubstr("use 1 to 16")) << threads;
  }
  ProgramResult cache = Run({"put", "--cache", "sometimes", "--location", "device:0", "c", path});
  EXPECT_EQ(cache.exit_code, 2) << Describe(cache);
  EXPECT_THAT(cache.err, HasSubstr("use keep or drop"));
  ProgramResult both = Run({"cp", "--direct-io", "--no-direct-io", path, "b"});
  EXPECT_EQ(both.exit_code, 2) << Describe(both);
  EXPECT_THAT(both.err, HasSubstr("--direct-io"));
  EXPECT_THAT(Names(), IsEmpty());
}

// stdin may be a file something read 3 bytes of: O_DIRECT cannot start
// there, which --direct-io says; the default reads on through the cache.
TEST_F(MemctlDeviceTest, DirectIoFromAnUnalignedPositionIsRefusedAndTheDefaultReadsOn) {
  StartDaemon();
  const std::string bytes = RandomBytes((std::size_t{3} << 20) + 5, 13);
  const std::string path = WriteFile("in", bytes);
  const std::string memctl = BinDir() + "/memctl";
  const std::string script = absl::StrCat(
      "exec < ", path, "; dd bs=1 count=3 of=/dev/null 2>/dev/null; ", memctl,
      " put --direct-io --location device:0 forced -; echo \"forced=$?\"; ", memctl,
      " put --json --location device:0 auto -; echo \"auto=$?\"");
  ProgramResult run = RunProgram("/bin/sh", {"-c", script}, "", Environment(),
                                 absl::Seconds(120));
  ASSERT_EQ(run.exit_code, 0) << Describe(run);
  EXPECT_THAT(run.out, HasSubstr("forced=1"));
  EXPECT_THAT(run.err, AllOf(HasSubstr("FAILED_PRECONDITION"), HasSubstr("at byte 3"),
                             HasSubstr("drop --direct-io")));
  EXPECT_EQ(client_->Stat("forced").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(run.out, HasSubstr("auto=0"));
  EXPECT_THAT(run.out, ContainsRegex("\"file_io\": ?\"buffered\""));
  EXPECT_TRUE(Get("auto") == bytes.substr(3));
}

// In a mount namespace of its own, memctl reads a file on ramfs, which has
// no O_DIRECT: --direct-io fails and says so, the default reads through the
// page cache.
TEST_F(MemctlDeviceTest, DirectIoOnAFilesystemWithoutItFailsAndTheDefaultFallsBack) {
  StartDaemon();
  const std::string mount = files_.Join("ramfs");
  ASSERT_EQ(::mkdir(mount.c_str(), 0700), 0);
  const std::string memctl = BinDir() + "/memctl";
  const std::string script = absl::StrCat(
      "mount -t ramfs memd-test ", mount, " || exit 99; head -c 100000 /dev/urandom > ",
      mount, "/f; ", memctl, " put --json --direct-io --location device:0 forced ", mount,
      "/f; echo \"forced=$?\"; ", memctl, " put --json --location device:0 auto ", mount,
      "/f; echo \"auto=$?\"");
  std::vector<std::string> args = {"-m"};
  if (::geteuid() != 0) args.insert(args.begin(), "-r");
  args.insert(args.end(), {"sh", "-c", script});
  ProgramResult run =
      RunProgram("/usr/bin/unshare", args, "", Environment(), absl::Seconds(120));
  if (run.exit_code != 0 || run.out.find("forced=") == std::string::npos) {
    GTEST_SKIP() << "no mount namespace with ramfs here: " << Describe(run);
  }
  EXPECT_THAT(run.out, HasSubstr("forced=1"));
  EXPECT_THAT(run.err, AllOf(HasSubstr("FAILED_PRECONDITION"), HasSubstr("refuses O_DIRECT"),
                             HasSubstr("drop --direct-io")));
  EXPECT_EQ(client_->Stat("forced").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(run.out, HasSubstr("auto=0"));
  EXPECT_THAT(run.out, ContainsRegex("\"file_io\": ?\"buffered\""));
  EXPECT_TRUE(client_->Stat("auto").ok());
}

TEST_F(MemctlDeviceTest, StagingFallsBackToHostMemoryWhenPinnedMemoryIsShort) {
  // This user may hold 1 MiB of pinned memory: memctl's staging cannot be
  // pinned, so the engine stages from host memory itself.
  StartDaemon({}, {"--max-uid-bytes", "pinned=1MiB"});
  const std::string bytes = RandomBytes(6 << 20, 13);
  ProgramResult put =
      Run({"put", "--json", "--location", "device:0", "fallback", WriteFile("in", bytes)});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  EXPECT_EQ(Json::parse(put.out).at("path"), "staged");
  EXPECT_TRUE(Get("fallback") == bytes);
}

TEST_F(MemctlDeviceTest, GetOfADeviceBufferWritesStdout) {
  StartDaemon();
  const std::string bytes = RandomBytes(1 << 20, 12);
  ASSERT_EQ(Run({"put", "--location", "device:0", "d", WriteFile("in", bytes)}).exit_code, 0);
  ProgramResult get = Run({"get", "d"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_TRUE(get.out == bytes);
  ProgramResult cp = Run({"cp", "d", "-"});
  ASSERT_EQ(cp.exit_code, 0) << Describe(cp);
  EXPECT_TRUE(cp.out == bytes);
}

// get --location reads (and makes) the copy at a device; prefetch and drop
// manage copies; inspect and ls show them.
TEST_F(MemctlDeviceTest, ReplicasThroughGetPrefetchDropInspectAndLs) {
  StartDaemon({{"MEMD_FAKE_CUDA_DEVICES", "2"}});
  const std::string bytes = RandomBytes(1 << 20, 25);
  ASSERT_EQ(Run({"put", "w", WriteFile("in", bytes)}).exit_code, 0);
  const std::string out = files_.Join("at-device-1");
  ProgramResult get = Run({"get", "--location", "device:1", "w", "-o", out});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_TRUE(ReadWholeFile(out) == bytes) << "the copy at device:1 differs";

  ProgramResult inspect = Run({"inspect", "w"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  EXPECT_THAT(inspect.out, ContainsRegex("sync state +synchronized"));
  EXPECT_THAT(inspect.out, ContainsRegex("LOCATION +STATE +GENERATION"));
  EXPECT_THAT(inspect.out, ContainsRegex("device:1 +current"));
  EXPECT_THAT(inspect.out, Not(HasSubstr("fill failure")));
  ProgramResult ls = Run({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << Describe(ls);
  EXPECT_THAT(ls.out, AllOf(HasSubstr("SYNC"), HasSubstr("synchronized")));

  ProgramResult prefetch = Run({"prefetch", "--wait", "60", "w", "device:0"});
  ASSERT_EQ(prefetch.exit_code, 0) << Describe(prefetch);
  EXPECT_THAT(prefetch.out, AllOf(HasSubstr("prefetch w to device:0: synchronized"),
                                  ContainsRegex("device:0 +current")));
  ProgramResult drop = Run({"drop", "--json", "w", "device:1"});
  ASSERT_EQ(drop.exit_code, 0) << Describe(drop);
  Json replicas = Json::parse(drop.out).at("replicas");
  ASSERT_EQ(replicas.size(), 2u) << drop.out;
  EXPECT_EQ(replicas[0].at("location"), "host");
  EXPECT_EQ(replicas[1].at("location"), "device:0");
  ProgramResult home = Run({"drop", "w", "host"});
  EXPECT_EQ(home.exit_code, kExitFailed) << Describe(home);
  EXPECT_THAT(home.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(home.out, IsEmpty());
}

TEST_F(MemctlDeviceTest, CpMovesBytesBetweenHostAndDeviceBuffers) {
  StartDaemon();
  const std::string bytes = RandomBytes((std::size_t{9} << 20) + 5, 21);
  ASSERT_EQ(Run({"put", "host/src", WriteFile("in", bytes)}).exit_code, 0);

  ProgramResult h2d = Run({"cp", "--json", "--location", "device:0", "host/src", "dev/a"});
  ASSERT_EQ(h2d.exit_code, 0) << Describe(h2d);
  Json json = Json::parse(h2d.out);
  EXPECT_EQ(json.at("bytes"), bytes.size());
  EXPECT_THAT(json.at("path").get<std::string>(), Not(IsEmpty()));
  EXPECT_EQ(client_->Stat("dev/a")->location, "device:0");

  // A new destination is where the source is unless told otherwise.
  ProgramResult d2d = Run({"cp", "dev/a", "dev/b"});
  ASSERT_EQ(d2d.exit_code, 0) << Describe(d2d);
  EXPECT_EQ(client_->Stat("dev/b")->location, "device:0");

  ProgramResult d2h = Run({"cp", "--location", "host", "dev/b", "host/back"});
  ASSERT_EQ(d2h.exit_code, 0) << Describe(d2h);
  ProgramResult back = Run({"get", "host/back"});
  ASSERT_EQ(back.exit_code, 0) << Describe(back);
  EXPECT_TRUE(back.out == bytes) << "host -> device -> device -> host differs";
}

TEST_F(MemctlDeviceTest, CpFileIntoADeviceBufferWithEveryPriority) {
  StartDaemon();
  const std::string bytes = RandomBytes(2 << 20, 30);
  const std::string file = WriteFile("in", bytes);
  for (const char* priority : {"critical", "normal", "background"}) {
    const std::string name = absl::StrCat("prio/", priority);
    ProgramResult cp =
        Run({"cp", "--priority", priority, "--location", "device:0", file, name});
    ASSERT_EQ(cp.exit_code, 0) << priority << "\n" << Describe(cp);
    EXPECT_TRUE(Get(name) == bytes) << priority;
  }
}

// A modelled link slow enough that the copy outlasts the timeout: 24 MiB
// at 20 MB/s take more than a second.
const std::vector<std::pair<std::string, std::string>> kSlowLink = {
    {"MEMD_FAKE_CUDA_LINK_GBPS", "0.02"}};

TEST_F(MemctlDeviceTest, APutThatOutlastsItsTimeoutFailsAndLeavesNothing) {
  StartDaemon(kSlowLink);
  const std::string file = WriteFile("in", RandomBytes(24 << 20, 2));
  ProgramResult put =
      Run({"put", "--timeout", "0.2", "--location", "device:0", "slow", file});
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.err, AllOf(StartsWith("memctl: put slow: DEADLINE_EXCEEDED: ")));
  EXPECT_THAT(Names(), IsEmpty()) << "neither the buffer nor memctl's staging stays";
}

// Issue 22, finding 7: a get that fails before memctl has any of the
// buffer's bytes (here the copy off the GPU outlasts its timeout) leaves an
// existing file as it was: memctl empties it just before the first write,
// no longer when it opens it.
TEST_F(MemctlDeviceTest, AGetThatFailsBeforeItHasBytesLeavesTheFileAsItWas) {
  StartDaemon(kSlowLink);
  ProgramResult put = Run({"put", "--location", "device:0", "slow",
                           WriteFile("in", RandomBytes(24 << 20, 4))});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  const std::string kept = WriteFile("kept", "yesterday's copy");
  ProgramResult get = Run({"get", "--timeout", "0.2", "slow", "-o", kept});
  EXPECT_EQ(get.exit_code, kExitFailed) << Describe(get);
  EXPECT_THAT(get.err, StartsWith("memctl: get slow: DEADLINE_EXCEEDED: "));
  EXPECT_EQ(ReadWholeFile(kept), "yesterday's copy");
}

TEST_F(MemctlDeviceTest, AMemctlKilledMidPutLeavesNoBufferStagingOrTransfer) {
  StartDaemon(kSlowLink);
  const std::string file = WriteFile("in", RandomBytes(24 << 20, 7));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (const auto& [name, value] : Environment()) ::setenv(name.c_str(), value.c_str(), 1);
    const std::string program = BinDir() + "/memctl";
    ::execl(program.c_str(), program.c_str(), "put", "--location", "device:0", "killed",
            file.c_str(), nullptr);
    ::_exit(127);
  }
  // Mid-put: the buffer, memctl's staging and a copy exist.
  EXPECT_TRUE(test::PollUntil([&] {
    auto stats = client_->Stats();
    return stats.ok() && stats->transfers.active > 0 && Names().size() == 2;
  })) << "memctl never got to copying";
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(test::PollUntil([&] {
    auto stats = client_->Stats();
    return stats.ok() && stats->transfers.active == 0 && stats->leases == 0 &&
           Names().empty();
  })) << "left behind: " << testing::PrintToString(Names());
}

// A file cut short while put reads it: the slices read before went to the
// copies, the next read finds the end. put fails naming the file (libmemd's
// pipeline says OUT_OF_RANGE; memctl says what a person should suspect) and
// leaves neither the buffer nor its staging.
TEST_F(MemctlDeviceTest, AFileCutShortDuringAPutFailsNamingItAndLeavesNothing) {
  // 50 MB/s: the first 32 MiB copy takes 0.7 s at least (longer where
  // the four queued first share the link), and the ninth slice is read only
  // once it is done.
  StartDaemon({{"MEMD_FAKE_CUDA_LINK_GBPS", "0.05"}});
  std::string bytes;
  const std::string path = WriteLargeFile(files_.Join("large"), bytes);
  ProgramResult put;
  std::thread putter([&] {
    put = Run({"put", "--no-direct-io", "--location", "device:0", "cut", path});
  });
  const bool copying = test::PollUntil([&] {
    auto stats = client_->Stats();
    return stats.ok() && stats->transfers.active > 0;
  });
  EXPECT_EQ(::truncate(path.c_str(), 100 << 20), 0);
  putter.join();
  ASSERT_TRUE(copying) << "memctl never got to copying: " << Describe(put);
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.err, AllOf(StartsWith(absl::StrCat("memctl: read ", path,
                                                     ": FAILED_PRECONDITION: ")),
                             HasSubstr("the file ended before its"),
                             HasSubstr("did it change while memctl read it?")));
  EXPECT_TRUE(test::PollUntil([&] { return Names().empty(); }))
      << "left behind: " << testing::PrintToString(Names());
}

// A safetensors file of one U8 tensor of `data_bytes`, header padded to 8.
std::string SafetensorsFile(std::size_t data_bytes, unsigned seed) {
  std::string header = absl::StrCat(R"({"w":{"dtype":"U8","shape":[)", data_bytes,
                                    R"(],"data_offsets":[0,)", data_bytes,
                                    R"(]},"__metadata__":{"format":"pt"}})");
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) {
    bytes.push_back(static_cast<char>((std::uint64_t{header.size()} >> (8 * i)) & 0xff));
  }
  return bytes + header + RandomBytes(data_bytes, seed);
}

// put --format safetensors into GPU memory goes through staging like any
// put; inspect has the daemon copy the header back to read the tensors.
TEST_F(MemctlDeviceTest, PutSafetensorsOnADeviceAndInspectItsTensors) {
  StartDaemon();
  const std::string bytes = SafetensorsFile((std::size_t{3} << 20) + 5, 40);
  const std::string file = WriteFile("model.safetensors", bytes);
  ProgramResult put =
      Run({"put", "--format", "safetensors", "--json", "--location", "device:0", file});
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  Json json = Json::parse(put.out);
  const std::string name = json.at("name");
  EXPECT_THAT(name, AllOf(StartsWith("safetensors/"), testing::EndsWith("/device-0")));
  EXPECT_EQ(name.size(), std::string("safetensors//device-0").size() + 32);
  EXPECT_EQ(json.at("location"), "device:0");
  EXPECT_EQ(json.at("state"), "sealed");
  EXPECT_EQ(json.at("attrs").at("format"), "safetensors");
  EXPECT_TRUE(Get(name) == bytes);

  const std::uint64_t header_bytes =
      std::stoull(json.at("attrs").at("safetensors.header_bytes").get<std::string>());
  ProgramResult inspect = Run({"inspect", "--json", name});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  Json shown = Json::parse(inspect.out);
  ASSERT_TRUE(shown.contains("tensors")) << inspect.out;
  ASSERT_EQ(shown.at("tensors").size(), 1u);
  EXPECT_EQ(shown.at("tensors")[0].at("name"), "w");
  EXPECT_EQ(shown.at("tensors")[0].at("offset"), 8 + header_bytes);
  EXPECT_EQ(shown.at("tensors")[0].at("size_bytes"), (std::size_t{3} << 20) + 5);
  EXPECT_EQ(shown.at("metadata"), Json({{"format", "pt"}}));
  ProgramResult text = Run({"inspect", name});
  EXPECT_THAT(text.out, testing::ContainsRegex("\nw +U8 +\\[3145733\\] +[0-9]+ +3145733\n"));

  ProgramResult again = Run({"put", "--format", "safetensors", "--location", "device:0", file});
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_THAT(again.out, StartsWith(absl::StrCat("put ", name, ": already loaded: ")));
}

// The file is touched while its bytes are on their way to the GPU: memctl
// notices before the seal, fails, and leaves no buffer. Deterministic:
// memctl is stopped while a copy of its is still unfinished (so it cannot
// have checked yet), the file is touched, then memctl goes on.
TEST_F(MemctlDeviceTest, AFileChangedWhileLoadingFailsAndLeavesNoBuffer) {
  StartDaemon(kSlowLink);
  const std::string file = WriteFile("model.safetensors", SafetensorsFile(24 << 20, 41));
  int err_pipe[2];
  ASSERT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (const auto& [name, value] : Environment()) ::setenv(name.c_str(), value.c_str(), 1);
    ::dup2(err_pipe[1], STDERR_FILENO);
    const std::string program = BinDir() + "/memctl";
    ::execl(program.c_str(), program.c_str(), "put", "--format", "safetensors", "--location",
            "device:0", file.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  ASSERT_TRUE(test::PollUntil([&] {
    auto stats = client_->Stats();
    return stats.ok() && stats->transfers.active > 0;
  })) << "memctl never got to copying";
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  // 24 MiB go in two copies (16 MiB staging slices); with one unfinished,
  // memctl cannot have checked the file yet.
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_LT(stats->transfers.completed, 2u) << "memctl was past its copies when stopped";
  const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), now, 0), 0);
  ASSERT_EQ(::kill(child, SIGCONT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::string err;
  char chunk[4096];
  for (ssize_t got; (got = ::read(err_pipe[0], chunk, sizeof(chunk))) > 0;) {
    err.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(err_pipe[0]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitFailed) << err;
  EXPECT_THAT(err, AllOf(StartsWith("memctl: put safetensors/"), HasSubstr(": ABORTED: "),
                         HasSubstr(file + " changed while loading")));
  EXPECT_TRUE(test::PollUntil([&] { return Names().empty(); }))
      << "left behind: " << testing::PrintToString(Names());
}

TEST_F(MemctlDeviceTest, ALongCopyShowsAProgressBarOnATerminalAndClearsIt) {
  StartDaemon(kSlowLink);
  const std::string file = WriteFile("in", RandomBytes(24 << 20, 3));
  const std::string seen =
      test::RunOnATerminal(BinDir() + "/memctl", {"put", "--location", "device:0", "bar", file},
                           Environment())
          .out;
  EXPECT_THAT(seen, AllOf(HasSubstr("\r"), HasSubstr("put bar  ["), HasSubstr("B/s"),
                          HasSubstr("ETA "), HasSubstr("\r\033[K")))
      << seen;
  // The result line comes after the bar was erased.
  EXPECT_THAT(seen.substr(seen.rfind("\033[K")), HasSubstr("put bar: 24 MiB")) << seen;
}

// Issue 29: memctl transfers lists the copies queued or running, with their
// buffers, progress and session; a copy that ended is gone. The first copy
// takes seconds on the slow link (it is cancelled, not waited for); the
// second writes what the first writes, so it stays queued behind it.
TEST_F(MemctlDeviceTest, TransfersListsQueuedAndRunningCopiesUntilTheyEnd) {
  StartDaemon(kSlowLink);
  constexpr std::uint64_t kMiB = 1 << 20;
  // This process maps the device buffer it copies into: with the fake too.
  ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
  absl::Cleanup unset = [] { ::unsetenv("MEMD_CUDA_DRIVER"); };
  auto source = client_->Create("moving/src", 256 * kMiB);
  auto destination =
      client_->Create("moving/dst", 256 * kMiB, {.location = "device:0"});
  ASSERT_TRUE(source.ok() && destination.ok()) << source.status() << destination.status();
  auto running = client_->Copy({.buffer = &*source}, {.buffer = &*destination});
  ASSERT_TRUE(running.ok()) << running.status();
  auto queued = client_->Copy({.buffer = &*source, .offset = kMiB, .length = 4 * kMiB},
                              {.buffer = &*destination, .offset = 2 * kMiB, .length = 4 * kMiB},
                              {.priority = Priority::kBackground});
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_TRUE(test::PollUntil([&] {
    auto progress = running->Progress();
    return progress.ok() && progress->state == TransferState::kRunning;
  }));
  auto sessions = client_->Sessions();
  ASSERT_TRUE(sessions.ok()) << sessions.status();
  std::string command;
  for (const SessionInfo& session : *sessions) {
    if (session.id == client_->session_id()) command = session.command;
  }

  ProgramResult listed = Run({"transfers", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << Describe(listed);
  const Json json = Json::parse(listed.out);
  EXPECT_EQ(json["omitted"], 0);
  ASSERT_EQ(json["transfers"].size(), 2u) << listed.out;
  std::map<std::uint64_t, Json> by_id;
  for (const Json& transfer : json["transfers"]) by_id[transfer["progress"]["id"]] = transfer;
  ASSERT_TRUE(by_id.contains(running->id()) && by_id.contains(queued->id())) << listed.out;
  const Json& first = by_id[running->id()];
  EXPECT_EQ(first["progress"]["state"], "running");
  EXPECT_EQ(first["progress"]["bytes_total"], 256 * kMiB);
  EXPECT_EQ(first["progress"]["direction"], "h2d");
  EXPECT_EQ(first["progress"]["device"], 0);
  EXPECT_EQ(first["priority"], "normal");
  EXPECT_EQ(first["source_name"], "moving/src");
  EXPECT_EQ(first["source_location"], "host");
  EXPECT_EQ(first["destination_name"], "moving/dst");
  EXPECT_EQ(first["destination_location"], "device:0");
  EXPECT_EQ(first["session_id"], client_->session_id());
  EXPECT_EQ(first["pid"], ::getpid());
  EXPECT_EQ(first["uid"], ::getuid());
  EXPECT_EQ(first["command"], command);
  EXPECT_GE(first["age_ns"].get<std::int64_t>(), 0);
  const Json& second = by_id[queued->id()];
  EXPECT_EQ(second["progress"]["state"], "queued");
  EXPECT_EQ(second["progress"]["bytes_done"], 0);
  EXPECT_EQ(second["progress"]["bytes_total"], 4 * kMiB);
  EXPECT_EQ(second["priority"], "background");
  EXPECT_EQ(second["source_offset"], kMiB);
  EXPECT_EQ(second["destination_offset"], 2 * kMiB);

  ProgramResult table = Run({"transfers"});
  ASSERT_EQ(table.exit_code, 0) << Describe(table);
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("moving/src@host+1048576"), HasSubstr("moving/dst@device:0+2097152"),
                    HasSubstr("moving/dst@device:0 "), HasSubstr("h2d on device:0"),
                    HasSubstr("queued"), HasSubstr("running"), HasSubstr("background"),
                    HasSubstr(absl::StrCat(" ", ::getpid(), " "))))
      << table.out;

  // Ended copies are gone: the queued one at once when cancelled, the
  // running one once its chunks on the GPU are done.
  ASSERT_TRUE(queued->Cancel().ok());
  EXPECT_EQ(queued->Wait().code(), absl::StatusCode::kCancelled);
  listed = Run({"transfers", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << Describe(listed);
  ASSERT_EQ(Json::parse(listed.out)["transfers"].size(), 1u) << listed.out;
  EXPECT_EQ(Json::parse(listed.out)["transfers"][0]["progress"]["id"], running->id());
  ASSERT_TRUE(running->Cancel().ok());
  EXPECT_EQ(running->Wait().code(), absl::StatusCode::kCancelled);
  table = Run({"transfers"});
  ASSERT_EQ(table.exit_code, 0) << Describe(table);
  EXPECT_EQ(table.out, "no copies queued or running\n");
}

}  // namespace
}  // namespace memd
