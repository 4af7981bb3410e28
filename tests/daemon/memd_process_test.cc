// build/bin/memd as a process: start-up, systemd notifications, signals,
// refusing to run twice, stale sockets, bad flags.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/paths.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/http_get.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::BinDir;
using test::DaemonProcess;
using test::PathExists;
using test::ProgramResult;
using test::RunProgram;

std::unique_ptr<DaemonProcess> StartOrDie(std::vector<std::string> args = {}) {
  auto daemon = DaemonProcess::Start(std::move(args));
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

TEST(MemdProcessTest, SocketsExistWithTheConfiguredModeOnceReady) {
  auto daemon = StartOrDie({"--socket-mode", "0640"});
  ASSERT_NE(daemon, nullptr);
  for (const std::string& path : {ControlSocketPath(daemon->socket_dir()),
                                  SessionSocketPath(daemon->socket_dir())}) {
    struct stat info;
    ASSERT_EQ(::stat(path.c_str(), &info), 0) << path;
    EXPECT_TRUE(S_ISSOCK(info.st_mode)) << path;
    EXPECT_EQ(info.st_mode & 0777, 0640u) << path;
  }
  EXPECT_THAT(daemon->Log(), HasSubstr("metrics http://127.0.0.1:"));
}

TEST(MemdProcessTest, SigtermStopsCleanlyNotifiesAndRemovesItsSockets) {
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto buffer = (*client)->Create("held", 4096);
  ASSERT_TRUE(buffer.ok());

  EXPECT_EQ(daemon->Stop(SIGTERM), 0) << daemon->Log();
  std::string notes;
  for (std::string note = daemon->NextNotification(absl::ZeroDuration());
       !note.empty(); note = daemon->NextNotification(absl::ZeroDuration())) {
    notes += note;
  }
  EXPECT_THAT(notes, HasSubstr("STOPPING=1"));
  EXPECT_FALSE(PathExists(ControlSocketPath(daemon->socket_dir())));
  EXPECT_FALSE(PathExists(SessionSocketPath(daemon->socket_dir())));
  EXPECT_FALSE(PathExists(daemon->socket_dir() + "/memd.lock"));
  EXPECT_THAT(daemon->Log(), HasSubstr("stopped"));
  // The client sees the daemon gone, and says where it looked.
  EXPECT_EQ((*client)->Stats().status().code(), absl::StatusCode::kUnavailable);
}

TEST(MemdProcessTest, SigintStopsToo) {
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  EXPECT_EQ(daemon->Stop(SIGINT), 0) << daemon->Log();
}

TEST(MemdProcessTest, ReadyNotificationSaysWhereItServes) {
  test::TempDir dir;
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  // Start() consumed READY=1; the log says the same in words.
  EXPECT_THAT(daemon->Log(), HasSubstr(ControlSocketPath(daemon->socket_dir())));
  EXPECT_THAT(daemon->Log(), HasSubstr(SessionSocketPath(daemon->socket_dir())));
}

TEST(MemdProcessTest, RefusesToRunOverALiveDaemon) {
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  ProgramResult second = RunProgram(
      BinDir() + "/memd",
      {"--socket-dir", daemon->socket_dir(), "--metrics-address", ""});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("another memd (pid " +
                                    std::to_string(daemon->pid()) + ")"));
  // The first one is unharmed.
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Ping().ok());
}

TEST(MemdProcessTest, CleansUpStaleSocketsOfAKilledDaemon) {
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  const std::string dir = daemon->socket_dir();
  ASSERT_EQ(daemon->Stop(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(PathExists(ControlSocketPath(dir)));  // Left behind.

  auto again = DaemonProcess::Start({"--socket-dir", dir});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT((*again)->Log(), HasSubstr("removing stale socket"));
  auto client = Client::Connect({.socket_dir = dir});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Ping().ok());
}

TEST(MemdProcessTest, RefusesASocketSomeoneElseListensOn) {
  test::TempDir dir;
  auto squatter = ListenUnix(ControlSocketPath(dir.path()), SOCK_STREAM, 0600);
  ASSERT_TRUE(squatter.ok());
  ProgramResult result = RunProgram(
      BinDir() + "/memd", {"--socket-dir", dir.path(), "--metrics-address", ""});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("is accepting connections on"));
}

TEST(MemdProcessTest, BadFlagsExitWithUsageError) {
  ProgramResult unknown = RunProgram(BinDir() + "/memd", {"--no-such-flag"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no-such-flag"));

  ProgramResult backend = RunProgram(BinDir() + "/memd", {"--backend", "tpu"});
  EXPECT_EQ(backend.exit_code, 2);
  EXPECT_THAT(backend.err, HasSubstr("'tpu'"));

  ProgramResult size = RunProgram(BinDir() + "/memd", {"--max-buffer-bytes", "lots"});
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_THAT(size.err, HasSubstr("--max-buffer-bytes"));
}

TEST(MemdProcessTest, HelpAndVersionExitZero) {
  ProgramResult help = RunProgram(BinDir() + "/memd", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--socket-dir"));
  EXPECT_THAT(help.out, HasSubstr("--metrics-address"));
  ProgramResult version = RunProgram(BinDir() + "/memd", {"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, ::testing::MatchesRegex("memd [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST(MemdProcessTest, UnavailableBackendRefusesToStartAndSaysWhy) {
  test::TempDir dir;
  ProgramResult result = RunProgram(
      BinDir() + "/memd", {"--socket-dir", dir.Join("run"), "--backend", "cuda",
                           "--cuda-driver", dir.Join("no-such-libcuda.so"),
                           "--metrics-address", ""});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--backend cuda: no CUDA driver: cannot load"));
  EXPECT_FALSE(PathExists(ControlSocketPath(dir.Join("run"))));
}

TEST(MemdProcessTest, MetricsAddressInUseRefusesToStartAndSaysWhatToDo) {
  // Another program holds the port (civetweb said only "null context").
  UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(holder);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&in), sizeof(in)), 0);
  ASSERT_EQ(::listen(holder.get(), 1), 0);
  socklen_t length = sizeof(in);
  ASSERT_EQ(::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&in), &length), 0);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(in.sin_port));
  test::TempDir dir;
  ProgramResult result = RunProgram(
      BinDir() + "/memd",
      {"--socket-dir", dir.Join("run"), "--metrics-address", taken});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(absl::StrCat("cannot serve metrics on ", taken, ": port ",
                                                 ntohs(in.sin_port), " is in use")));
  EXPECT_THAT(result.err, HasSubstr("HOST:0 for any free port"));
  EXPECT_THAT(result.err, HasSubstr("or to \"\" to serve no metrics"));
  EXPECT_THAT(result.err, Not(HasSubstr("null context")));
}

// GET /metrics: the body (a failed request fails the test).
std::string Scrape(const std::string& address) {
  auto response = test::HttpGet(address, "/metrics");
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok()) return "";
  EXPECT_EQ(response->status, 200);
  return response->body;
}

TEST(MemdProcessTest, MetricsEndpointServesLiveState) {
  auto daemon = StartOrDie();
  ASSERT_NE(daemon, nullptr);
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 2; ++i) {
    auto buffer = (*client)->Create("m", 4096, {.persistence = Persistence::kEphemeral});
    ASSERT_TRUE(buffer.ok());
  }
  auto kept = (*client)->Create("kept", 8192);
  ASSERT_TRUE(kept.ok());
  // Calls of the rpcs a hand-kept list of methods once missed.
  ASSERT_TRUE((*client)->Advise().ok());
  ASSERT_TRUE((*client)->Leaks().ok());
  ASSERT_TRUE((*client)->Transfers().ok());
  std::string body = Scrape((*client)->Stats()->metrics_address);
  // The first 4 KiB buffer reserved a small segment; the second came from
  // the 4 KiB class cache and the 8 KiB one was carved from the segment.
  EXPECT_THAT(body, HasSubstr("memd_pool_requests_total{location=\"host\",result=\"hit\"} 2"));
  EXPECT_THAT(body, HasSubstr("memd_pool_requests_total{location=\"host\",result=\"miss\"} 1"));
  EXPECT_THAT(body, HasSubstr("memd_pool_peak_used_bytes{location=\"host\"} 8192"));
  EXPECT_THAT(body, HasSubstr("memd_pool_fragmentation_ratio{location=\"host\"}"));
  EXPECT_THAT(body, HasSubstr(
      "memd_pool_size_class_allocations_total{location=\"host\",size_class=\"4096\"} 2"));
  EXPECT_THAT(body, HasSubstr("memd_pool_used_bytes{location=\"host\"} 8192"));
  EXPECT_THAT(body, HasSubstr("memd_sessions 1"));
  EXPECT_THAT(body, HasSubstr("memd_leases 1"));
  EXPECT_THAT(body, HasSubstr("memd_buffers{state=\"creating\"} 1"));
  EXPECT_THAT(body, HasSubstr("memd_buffers{state=\"sealed\"} 0"));
  EXPECT_THAT(body, HasSubstr("memd_quota_rejections_total{limit=\"max_buffers\"} 0"));
  EXPECT_THAT(body,
              HasSubstr("memd_quota_rejections_total{limit=\"max_sessions_per_uid\"} 0"));
  EXPECT_THAT(body, HasSubstr("memd_quota_rejections_total{limit=\"max_waits\"} 0"));
  // Every call so far is in the histogram: the Creates, the reports, the
  // Stats above.
  EXPECT_THAT(body, HasSubstr("memd_rpc_duration_seconds_count{code=\"OK\",method=\"Create\"} 3"));
  for (const char* method : {"Advise", "Leaks", "ListTransfers"}) {
    EXPECT_THAT(body, HasSubstr(absl::StrCat("memd_rpc_duration_seconds_count{code=\"OK\",method=\"",
                                             method, "\"} 1")));
  }
  EXPECT_THAT(body, HasSubstr(absl::StrCat("memd_build_info{version=\"", kVersion,
                                           "\",backend=\"host\"} 1")));
}

// Started by hand (no service manager), memd greets with two commands to
// try; they must work as printed.
TEST(MemdProcessTest, WelcomeShowsTwoCommandsThatWork) {
  test::TempDir dir;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("JOURNAL_STREAM");
    std::string bin = BinDir() + "/memd";
    ::execl(bin.c_str(), bin.c_str(), "--socket-dir", dir.Join("run").c_str(),
            "--metrics-address", "", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string welcome;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!absl::StrContains(welcome, "memctl get welcome -o -\n") &&
         absl::Now() < deadline) {
    pollfd fd{out[0], POLLIN, 0};
    if (::poll(&fd, 1, 100) <= 0) continue;
    char chunk[1024];
    ssize_t got = ::read(out[0], chunk, sizeof(chunk));
    if (got <= 0) break;
    welcome.append(chunk, got);
  }
  ::close(out[0]);
  EXPECT_THAT(welcome, HasSubstr("Try it"));
  // The two lines name the memctl beside this memd, by its full path (an
  // installed memd names the installed one), and work from anywhere.
  std::vector<std::string> commands;
  for (absl::string_view line : absl::StrSplit(welcome, '\n')) {
    if (absl::StrContains(line, std::filesystem::canonical(BinDir()).string() + "/memctl")) {
      commands.emplace_back(absl::StripAsciiWhitespace(line));
    }
  }
  ASSERT_EQ(commands.size(), 2u) << welcome;
  auto run = [&](const std::string& command) {
    test::TempDir cwd;
    return RunProgram("/bin/sh", {"-c", "cd " + cwd.path() + " && " + command});
  };
  ProgramResult put = run(commands[0]);
  EXPECT_EQ(put.exit_code, 0) << commands[0] << "\n" << put.err;
  ProgramResult get = run(commands[1]);
  EXPECT_EQ(get.exit_code, 0) << commands[1] << "\n" << get.err;
  EXPECT_EQ(get.out, "hello\n");
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(MemdProcessTest, TraceFileRecordsAllocationsThatReplay) {
  test::TempDir dir;
  const std::string trace = dir.Join("pool.csv");
  auto daemon = StartOrDie({"--trace-file", trace});
  ASSERT_NE(daemon, nullptr);
  {
    auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
    ASSERT_TRUE(client.ok());
    for (int i = 0; i < 5; ++i) {
      auto buffer = (*client)->Create("t" + std::to_string(i), 10000 * (i + 1),
                                      {.persistence = Persistence::kEphemeral});
      ASSERT_TRUE(buffer.ok());
    }
    ASSERT_TRUE((*client)->Create("kept", 3 << 20).ok());  // Dropped: unsealed.
  }
  ASSERT_EQ(daemon->Stop(SIGTERM), 0) << daemon->Log();
  std::ifstream file(trace);
  std::string header, line;
  std::getline(file, header);
  EXPECT_EQ(header, "op,id,bytes");
  int allocations = 0, frees = 0;
  while (std::getline(file, line)) {
    if (absl::StartsWith(line, "a,")) ++allocations;
    if (absl::StartsWith(line, "f,")) ++frees;
  }
  EXPECT_EQ(allocations, 6);
  EXPECT_EQ(frees, 6);
  ProgramResult replay = RunProgram(BinDir() + "/memd-replay", {"--trace", trace});
  EXPECT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_THAT(replay.out, HasSubstr("\"allocations\": 6"));
}

// Waits for a notification containing `what`; returns everything read.
std::string AwaitNotification(DaemonProcess& daemon, const std::string& what,
                              absl::Duration timeout = absl::Seconds(20)) {
  std::string seen;
  const absl::Time deadline = absl::Now() + timeout;
  while (!absl::StrContains(seen, what) && absl::Now() < deadline) {
    seen += daemon.NextNotification(absl::Milliseconds(100));
  }
  return seen;
}

TEST(MemdProcessTest, PingsTheSystemdWatchdog) {
  ::setenv("WATCHDOG_USEC", "200000", 1);  // As systemd sets for WatchdogSec=.
  auto daemon = DaemonProcess::Start();
  ::unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_THAT(AwaitNotification(**daemon, "WATCHDOG=1"), HasSubstr("WATCHDOG=1"));
  // And keeps pinging.
  EXPECT_THAT(AwaitNotification(**daemon, "WATCHDOG=1"), HasSubstr("WATCHDOG=1"));
  EXPECT_THAT((*daemon)->Log(), HasSubstr("watchdog: pinging every 100ms"));
}

TEST(MemdProcessTest, SighupReloadsLimitsAndLogLevel) {
  test::TempDir dir;
  const std::string config = dir.Join("memd.toml");
  std::ofstream(config) << "max_buffers = 1\n";
  auto daemon = StartOrDie({"--config", config});
  ASSERT_NE(daemon, nullptr);
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto first = (*client)->Create("a", 10);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*client)->Create("b", 10).status().code(),
            absl::StatusCode::kResourceExhausted);

  std::ofstream(config, std::ios::trunc) << "max_buffers = 5\nlog_level = \"debug\"\n";
  ASSERT_EQ(::kill(daemon->pid(), SIGHUP), 0);
  std::string notes = AwaitNotification(*daemon, "READY=1");
  EXPECT_THAT(notes, HasSubstr("RELOADING=1"));
  EXPECT_TRUE((*client)->Create("b", 10).ok());
  EXPECT_THAT(daemon->Log(), HasSubstr("SIGHUP: reloaded log level (debug) and limits"));
  EXPECT_THAT(daemon->Log(), Not(HasSubstr("apply only after a restart")));

  // Pool settings wait for a restart, and the log names them.
  std::ofstream(config, std::ios::trunc)
      << "max_buffers = 5\npool_idle_budget = 0.5\npool_trim_idle_seconds = 7\n";
  ASSERT_EQ(::kill(daemon->pid(), SIGHUP), 0);
  AwaitNotification(*daemon, "READY=1");
  EXPECT_THAT(daemon->Log(),
              HasSubstr("apply only after a restart: pool_idle_budget, "
                        "pool_trim_idle_seconds"));

  // A broken file keeps what runs, and says why.
  std::ofstream(config, std::ios::trunc) << "max_buffers = \"many\"\n";
  ASSERT_EQ(::kill(daemon->pid(), SIGHUP), 0);
  AwaitNotification(*daemon, "READY=1");
  EXPECT_THAT(daemon->Log(), HasSubstr("SIGHUP: keeping the running configuration"));
  EXPECT_TRUE((*client)->Create("c", 10).ok());
}

// Byte quotas end to end: RESOURCE_EXHAUSTED through gRPC with the numbers,
// counted in /metrics, and changed by a reload.
TEST(MemdProcessTest, ByteQuotasRefuseCountAndReload) {
  test::TempDir dir;
  const std::string config = dir.Join("memd.toml");
  std::ofstream(config) << "max_uid_bytes = \"host=1MiB\"\n";
  auto daemon = StartOrDie({"--config", config});
  ASSERT_NE(daemon, nullptr);
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto kept = (*client)->Create("kept", 768 * 1024);
  ASSERT_TRUE(kept.ok()) << kept.status();
  auto over = (*client)->Create("over", 512 * 1024);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr(absl::StrCat("would take uid ", ::getuid(),
                                     " over its quota of 1 MiB (1048576 bytes) at host "
                                     "(max_uid_bytes): its buffers there take 768 KiB")));
  std::string body = Scrape((*client)->Stats()->metrics_address);
  EXPECT_THAT(body, HasSubstr("memd_quota_rejections_total{limit=\"max_uid_bytes\","
                              "location=\"host\"} 1"));
  EXPECT_THAT(body, HasSubstr("memd_quota_rejections_total{limit=\"max_session_bytes\","
                              "location=\"host\"} 0"));

  std::ofstream(config, std::ios::trunc) << "max_uid_bytes = \"host=2MiB\"\n";
  ASSERT_EQ(::kill(daemon->pid(), SIGHUP), 0);
  AwaitNotification(*daemon, "READY=1");
  EXPECT_TRUE((*client)->Create("over", 512 * 1024).ok());
}

TEST(MemdProcessTest, ConfigFileSetsKeysAndFlagsWin) {
  test::TempDir dir;
  const std::string config = dir.Join("memd.toml");
  std::ofstream(config) << "max_buffer_bytes = \"1MiB\"\n"
                           "socket_mode = 0o600\n"
                           "log_level = \"debug\"\n";
  auto daemon = StartOrDie({"--config", config, "--socket-mode", "0660"});
  ASSERT_NE(daemon, nullptr);
  struct stat info;
  ASSERT_EQ(::stat(ControlSocketPath(daemon->socket_dir()).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0660u);  // The flag won.
  auto client = Client::Connect({.socket_dir = daemon->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto big = (*client)->Create("big", (1 << 20) + 1);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("maximum of 1048576"));
  EXPECT_THAT(daemon->Log(), HasSubstr("debug"));
}

TEST(MemdProcessTest, BadConfigFileExitsWithTheReason) {
  test::TempDir dir;
  const std::string config = dir.Join("memd.toml");
  std::ofstream(config) << "max_bufer_bytes = 10\n";
  ProgramResult typo = RunProgram(BinDir() + "/memd", {"--config", config});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("unknown key 'max_bufer_bytes'"));

  std::ofstream(config, std::ios::trunc) << "backend = [1, 2]\n";
  ProgramResult type = RunProgram(BinDir() + "/memd", {"--config", config});
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_THAT(type.err, HasSubstr("backend"));

  std::ofstream(config, std::ios::trunc) << "this is not toml\n";
  ProgramResult syntax = RunProgram(BinDir() + "/memd", {"--config", config});
  EXPECT_EQ(syntax.exit_code, 2);
  EXPECT_THAT(syntax.err, HasSubstr("memd.toml:1"));

  ProgramResult missing =
      RunProgram(BinDir() + "/memd", {"--config", dir.Join("absent.toml")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("absent.toml"));
}

}  // namespace
}  // namespace memd
