// Replicas end to end on the project's fake CUDA driver: a sealed host
// buffer, and several processes per GPU opening it at that GPU at once. The
// daemon makes one copy per GPU, which every opener there shares, and each
// reads the host's bytes back through the driver.

#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"

namespace memd {
namespace {

using test::BinDir;
using test::DaemonProcess;

// Whole pages and one byte, in one 4 MiB chunk: the copy threads split
// such a chunk into shares that once fell a byte short of it.
constexpr std::uint64_t kSize = (std::uint64_t{1} << 20) + 1;
constexpr std::uint32_t kSeed = 25;
constexpr int kOpenersPerDevice = 3;

class ReplicaTest : public ::testing::TestWithParam<int> {
 protected:
  ReplicaTest() { ::unsetenv("CUDA_VISIBLE_DEVICES"); }

  int devices() const { return GetParam(); }

  void StartDaemon() {
    const std::string count = absl::StrCat(devices());
    auto daemon = DaemonProcess::StartWithEnvironment(
        {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH},
        {{"MEMD_FAKE_CUDA_DEVICES", count}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // memd-test-client ARGS in a child that sees the daemon's GPUs; returns
  // its pid at once.
  pid_t Spawn(const std::vector<std::string>& args) {
    const std::string bin = BinDir() + "/memd-test-client";
    const std::string count = absl::StrCat(devices());
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
      ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
      ::setenv("MEMD_FAKE_CUDA_DEVICES", count.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(bin.c_str())};
      for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  static int ExitCode(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Every opener at every device at once; the exit code of each, by device.
  std::map<int, std::vector<int>> OpenEverywhere(const std::string& name, std::uint32_t seed) {
    std::map<int, std::vector<pid_t>> pids;
    for (int device = 0; device < devices(); ++device) {
      for (int i = 0; i < kOpenersPerDevice; ++i) {
        pids[device].push_back(Spawn({"device-consume-at", name, absl::StrCat(kSize),
                                      absl::StrCat(seed), absl::StrCat("device:", device)}));
      }
    }
    std::map<int, std::vector<int>> codes;
    for (auto& [device, started] : pids) {
      for (pid_t pid : started) codes[device].push_back(ExitCode(pid));
    }
    return codes;
  }

  void PutHostBuffer(const std::string& name) {
    auto buffer = client_->Create(name, kSize);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    test::FillPattern(buffer->mutable_data(), kSeed);
    ASSERT_TRUE(buffer->Seal().ok());
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_P(ReplicaTest, EveryOpenerAtEveryDeviceReadsTheHostBytesFromOneCopy) {
  StartDaemon();
  PutHostBuffer("weights");
  auto before = client_->Stats();
  ASSERT_TRUE(before.ok()) << before.status();

  const std::vector<int> all_ok(kOpenersPerDevice, 0);
  for (const auto& [device, codes] : OpenEverywhere("weights", kSeed)) {
    EXPECT_EQ(codes, all_ok) << "openers at device:" << device
                             << " (4: the bytes differ, 1: the open failed)";
  }

  auto info = client_->Stat("weights");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->location, "host");
  EXPECT_EQ(info->sync_state, "synchronized");
  EXPECT_EQ(info->fill_failure, "");
  ASSERT_EQ(info->replicas.size(), static_cast<std::size_t>(devices() + 1));
  EXPECT_EQ(info->replicas[0].location, "host");
  for (int device = 0; device < devices(); ++device) {
    const ReplicaInfo& replica = info->replicas[device + 1];
    EXPECT_EQ(replica.location, absl::StrCat("device:", device));
    EXPECT_EQ(replica.state, "current");
    EXPECT_EQ(replica.generation, info->generation);
    EXPECT_EQ(replica.readers, 0u) << "every opener has exited";
  }
  // One copy per device, however many opened there.
  auto after = client_->Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->transfers.completed - before->transfers.completed,
            static_cast<std::uint64_t>(devices()));
  EXPECT_EQ(after->transfers.failed, before->transfers.failed);

  // A second round finds every copy there: nothing more moves.
  for (const auto& [device, codes] : OpenEverywhere("weights", kSeed)) {
    EXPECT_EQ(codes, all_ok) << "second round at device:" << device;
  }
  auto again = client_->Stats();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->transfers.completed, after->transfers.completed);
}

TEST_P(ReplicaTest, TheCheckCanFail) {
  StartDaemon();
  PutHostBuffer("weights");
  for (const auto& [device, codes] : OpenEverywhere("weights", kSeed + 1)) {
    EXPECT_EQ(codes, std::vector<int>(kOpenersPerDevice, 4)) << "device:" << device;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ReplicaTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Gpus");
                         });

}  // namespace
}  // namespace memd
