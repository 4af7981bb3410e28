#pragma once

// The fixture of memctl's end-to-end tests (memctl_test.cc and the files
// beside it, one program): a real memd per test, the real memctl binary,
// and what an operator or a script would see (stdout, stderr, exit code).

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
#include "tools/memctl/cli_subcommands.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd::memctl_test {

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

inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

inline std::string Memctl() { return BinDir() + "/memctl"; }

// Every byte value, several times over and in both orders.
inline std::string AllByteValues() {
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
inline void ExpectFailure(const ProgramResult& result, const std::string& step,
                   const std::string& code) {
  EXPECT_EQ(result.exit_code, kExitFailed) << Describe(result);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, StartsWith(absl::StrCat("memctl: ", step, ": ", code, ": ")))
      << Describe(result);
}

}  // namespace memd::memctl_test
