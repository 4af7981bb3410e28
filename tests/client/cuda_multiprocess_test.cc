// GPU memory end to end on the project's fake CUDA driver: a real memd with
// the CUDA backend, real client processes importing what it exports.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "nlohmann/json.hpp"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::BinDir;
using test::DaemonProcess;
using test::ProgramResult;
using test::RunProgram;

constexpr std::uint64_t kMiB = 1 << 20;

class CudaTest : public ::testing::Test {
 protected:
  // The fake honours CUDA_VISIBLE_DEVICES as CUDA does, and every process
  // here inherits this one's environment: tests that want it set it.
  CudaTest() { ::unsetenv("CUDA_VISIBLE_DEVICES"); }

  // Starts memd on the fake driver; `fake_env` configures the daemon's fake
  // (MEMD_FAKE_CUDA_*), read when it loads the driver.
  void StartDaemon(std::vector<std::string> args = {},
                   std::vector<std::pair<std::string, std::string>> fake_env = {}) {
    args.insert(args.begin(), {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
    auto daemon = DaemonProcess::StartWithEnvironment(args, {fake_env.begin(), fake_env.end()});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // `env` adds to the program's environment: the fake's MEMD_FAKE_CUDA_*
  // (each process's fake reads its own), CUDA_VISIBLE_DEVICES.
  ProgramResult Run(const std::string& program, std::vector<std::string> args,
                    const std::string& input = "",
                    std::map<std::string, std::string> env = {}) {
    env.emplace("MEMD_SOCKET_DIR", daemon_->socket_dir());
    env.emplace("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH);
    return RunProgram(BinDir() + "/" + program, args, input, env);
  }
  ProgramResult Client(std::vector<std::string> args,
                       std::map<std::string, std::string> env = {}) {
    return Run("memd-test-client", std::move(args), "", std::move(env));
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<memd::Client> client_;
};

TEST_F(CudaTest, DeviceBufferWrittenInOneProcessReadsBackInAnother) {
  StartDaemon();
  ProgramResult produced = Client({"device-produce", "weights", "5000000", "7", "0"});
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
  auto info = client_->Stat("weights");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->location, "device:0");
  EXPECT_EQ(info->state, BufferState::kSealed);
  ProgramResult consumed = Client({"device-consume", "weights", "5000000", "7"});
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
  ProgramResult wrong = Client({"device-consume", "weights", "5000000", "8"});
  EXPECT_EQ(wrong.exit_code, 4);  // The check can fail.
}

TEST_F(CudaTest, AnImporterWritesWhatAThirdProcessReads) {
  StartDaemon();
  // Process A creates the buffer and holds it unsealed; B imports it
  // read-write, writes and seals; C reads what B wrote.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t creator = ::fork();
  ASSERT_GE(creator, 0);
  if (creator == 0) {
    ::dup2(ready[1], 1);
    ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
    std::string bin = BinDir() + "/memd-test-client";
    ::execl(bin.c_str(), bin.c_str(), "device-create-hold", "shared", "3000000", nullptr);
    ::_exit(127);
  }
  ::close(ready[1]);
  // Within a minute, or the failure shows where the child hangs.
  absl::StatusOr<std::string> said = test::ReadFromChild(ready[0], creator);
  ::close(ready[0]);
  ASSERT_TRUE(said.ok()) << said.status();
  ASSERT_EQ(*said, "held\n");
  ProgramResult joined = Client({"device-join", "shared", "11"});
  EXPECT_EQ(joined.exit_code, 0) << joined.out << joined.err;
  ProgramResult read = Client({"device-consume", "shared", "3000000", "11"});
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
  ::kill(creator, SIGKILL);
  ::waitpid(creator, nullptr, 0);
}

TEST_F(CudaTest, LegacyIpcHandlesWorkToo) {
  StartDaemon({"--cuda-handles", "ipc"});
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->devices.size(), 1u);
  EXPECT_EQ(stats->devices[0].handle_type, "ipc");
  ASSERT_EQ(Client({"device-produce", "w", "3000000", "3", "0"}).exit_code, 0);
  ProgramResult consumed = Client({"device-consume", "w", "3000000", "3"});
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
}

TEST_F(CudaTest, SeveralDeviceBuffersEachKeepTheirOwnBytes) {
  StartDaemon();
  for (int i = 0; i < 3; ++i) {
    const std::string name = "small/" + std::to_string(i);
    ASSERT_EQ(Client({"device-produce", name, "100000", std::to_string(i), "0"}).exit_code, 0);
  }
  for (int i = 0; i < 3; ++i) {
    const std::string name = "small/" + std::to_string(i);
    EXPECT_EQ(Client({"device-consume", name, "100000", std::to_string(i)}).exit_code, 0)
        << name;
  }
}

// A fresh process, as a Python one before PyTorch touched CUDA, opens
// device buffers with no context of its own: libmemd imports each into its
// GPU's primary context (the one PyTorch and CuPy use), retains that
// context while a Buffer lives and not after, and leaves the thread with no
// context current. memd-test-client device-open-fresh checks each of these
// and reads the bytes in the primary context.
class PrimaryContextTest : public CudaTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(PrimaryContextTest, AFreshProcessOpensDeviceBuffersWithoutAContextOfItsOwn) {
  const std::map<std::string, std::string> two_gpus = {{"MEMD_FAKE_CUDA_DEVICES", "2"}};
  StartDaemon({"--cuda-handles", GetParam()}, {two_gpus.begin(), two_gpus.end()});
  ASSERT_EQ(Client({"device-produce", "a", "3000000", "1", "0"}, two_gpus).exit_code, 0);
  ASSERT_EQ(Client({"device-produce", "b", "5000000", "2", "0"}, two_gpus).exit_code, 0);
  ASSERT_EQ(Client({"device-produce", "c", "1000000", "3", "1"}, two_gpus).exit_code, 0);
  const std::vector<std::string> fresh = {"device-open-fresh", "a", "3000000", "1",
                                          "b",                 "5000000", "2",
                                          "c",                 "1000000", "3"};
  ProgramResult opened = Client(fresh, two_gpus);
  EXPECT_EQ(opened.out, "OK\n") << opened.err;
  // Where this process numbers the GPUs the other way round.
  std::map<std::string, std::string> reversed = two_gpus;
  reversed["CUDA_VISIBLE_DEVICES"] = "1,0";
  ProgramResult swapped = Client(fresh, reversed);
  EXPECT_EQ(swapped.out, "OK\n") << swapped.err;
  EXPECT_EQ(client_->Stats()->leases, 0u);
}

INSTANTIATE_TEST_SUITE_P(Handles, PrimaryContextTest, ::testing::Values("vmm_fd", "ipc"));

// What a thread's own context does is as before: a context on the buffer's
// GPU is the one libmemd imports into, retaining nothing itself; one on
// another GPU is refused, naming both.
TEST_F(CudaTest, AThreadsOwnContextIsUsedAndOneOnAnotherGpuIsRefused) {
  StartDaemon({}, {{"MEMD_FAKE_CUDA_DEVICES", "2"}});
  const std::map<std::string, std::string> two_gpus = {{"MEMD_FAKE_CUDA_DEVICES", "2"}};
  ASSERT_EQ(Client({"device-produce", "on0", "1000", "1", "0"}, two_gpus).exit_code, 0);
  ASSERT_EQ(Client({"device-produce", "on1", "1000", "1", "1"}, two_gpus).exit_code, 0);
  ProgramResult same = Client({"device-open-in-context", "on0", "0"}, two_gpus);
  EXPECT_EQ(same.out, "OK\nprimary active 0\n") << same.err;
  ProgramResult other = Client({"device-open-in-context", "on1", "0"}, two_gpus);
  EXPECT_EQ(other.out, "FAILED_PRECONDITION\n") << other.err;
  EXPECT_THAT(other.err, HasSubstr("memd's device:1 (CUDA device 1 in this process)"));
  EXPECT_THAT(other.err, HasSubstr("current CUDA context is on CUDA device 0"));
  EXPECT_THAT(other.err, HasSubstr("cudaSetDevice(1)"));
  // The refused open left no lease behind.
  EXPECT_EQ(client_->Stat("on1")->lease_count, 0u);
}

// When libmemd cannot get the primary context, the error says which GPU,
// as memd and as this process number it, and what the driver said.
TEST_F(CudaTest, APrimaryContextThatCannotBeRetainedNamesTheGpu) {
  StartDaemon({}, {{"MEMD_FAKE_CUDA_DEVICES", "2"}});
  ASSERT_EQ(Client({"device-produce", "w", "1000", "1", "1"}, {{"MEMD_FAKE_CUDA_DEVICES", "2"}})
                .exit_code,
            0);
  // A GPU out of memory cannot make a context (CUDA_ERROR_OUT_OF_MEMORY = 2).
  ProgramResult refused =
      Client({"device-open-without-context", "w"},
             {{"MEMD_FAKE_CUDA_DEVICES", "2"},
              {"CUDA_VISIBLE_DEVICES", "1"},
              {"MEMD_FAKE_CUDA_FAULTS", "cuDevicePrimaryCtxRetain@1=2"}});
  EXPECT_EQ(refused.out, "RESOURCE_EXHAUSTED\n") << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("memd's device:1 (CUDA device 0 in this process)"));
  EXPECT_THAT(refused.err, HasSubstr("no current CUDA context"));
  EXPECT_THAT(refused.err, HasSubstr("cuDevicePrimaryCtxRetain failed"));
  EXPECT_THAT(refused.err, HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_EQ(client_->Stat("w")->lease_count, 0u);
}

TEST_F(CudaTest, NoCudaDriverInTheClientNamesTheBuffersLocation) {
  StartDaemon();
  ASSERT_EQ(Client({"device-produce", "w", "1000", "1", "0"}).exit_code, 0);
  ProgramResult refused =
      Client({"open", "w"}, {{"MEMD_CUDA_DRIVER", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(refused.out, "UNAVAILABLE\n") << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("memd's device:0"));
  EXPECT_THAT(refused.err, HasSubstr("no CUDA driver"));
  EXPECT_EQ(client_->Stat("w")->lease_count, 0u);
}

TEST_F(CudaTest, AKilledClientLosesItsDeviceLeases) {
  StartDaemon();
  ASSERT_EQ(Client({"device-produce", "w", "1000", "1", "0"}).exit_code, 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::dup2(ready[1], 1);
    ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
    std::string bin = BinDir() + "/memd-test-client";
    ::execl(bin.c_str(), bin.c_str(), "device-hold", "w", nullptr);
    ::_exit(127);
  }
  ::close(ready[1]);
  // Within a minute, or the failure shows where the child hangs.
  absl::StatusOr<std::string> said = test::ReadFromChild(ready[0], holder);
  ::close(ready[0]);
  ASSERT_TRUE(said.ok()) << said.status();
  ASSERT_EQ(*said, "held\n");
  EXPECT_EQ(client_->Stat("w")->lease_count, 1u);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  // The daemon sees the hang-up on its own thread (no timing asserted).
  EXPECT_TRUE(test::PollUntil([&] { return client_->Stat("w")->lease_count == 0; }));
}

TEST_F(CudaTest, OutOfDeviceMemoryIsACleanResourceExhausted) {
  // A 64 MiB device and a pool allowed more than that: the driver says no.
  StartDaemon({"--device-pool-limit-bytes", "1GiB"},
              {{"MEMD_FAKE_CUDA_MEMORY", "67108864"}});
  ProgramResult kept = Client({"device-produce", "kept", "50331648", "1", "0"});
  ASSERT_EQ(kept.exit_code, 0) << kept.err;  // 48 MiB, sealed, persistent.
  auto failed = client_->Create("big", 32 * kMiB, {.location = "device:0"});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("cuMemCreate"));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
  // The daemon is fine, and smaller requests still fit.
  ProgramResult small = Client({"device-produce", "small", "4000000", "1", "0"});
  EXPECT_EQ(small.exit_code, 0) << small.err;
}

TEST_F(CudaTest, ThePoolLimitOfADeviceComesFirst) {
  StartDaemon({}, {{"MEMD_FAKE_CUDA_MEMORY", "67108864"}});  // Pool: 90%.
  auto failed = client_->Create("big", 60 * kMiB, {.location = "device:0"});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("device:0 pool"));
}

TEST_F(CudaTest, StatsAndMemctlShowTheDevices) {
  StartDaemon({}, {{"MEMD_FAKE_CUDA_DEVICES", "2"}});
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->backend, "cuda");
  ASSERT_EQ(stats->devices.size(), 2u);
  EXPECT_EQ(stats->devices[1].name, "memd fake GPU 1");
  EXPECT_TRUE(stats->devices[0].vmm);
  EXPECT_EQ(stats->devices[0].handle_type, "vmm_fd");
  std::vector<std::string> locations;
  for (const auto& pool : stats->pools) locations.push_back(pool.location);
  EXPECT_THAT(locations, ::testing::ElementsAre("host", "pinned", "device:0", "device:1"));

  ProgramResult devices = Run("memctl", {"devices", "--json"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  auto json = nlohmann::json::parse(devices.out);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["ordinal"], 0);
  EXPECT_EQ(json[0]["uuid"], stats->devices[0].uuid);
  EXPECT_EQ(json[1]["handle_type"], "vmm_fd");
  for (const char* field : {"name", "total_bytes", "free_bytes", "vmm", "posix_fd"}) {
    EXPECT_TRUE(json[0].contains(field)) << field;
  }
  ProgramResult table = Run("memctl", {"devices"});
  EXPECT_THAT(table.out, HasSubstr("memd fake GPU 0"));
}

TEST_F(CudaTest, MemctlPutsAndGetsDeviceBuffers) {
  StartDaemon();
  std::string bytes;
  for (int i = 0; i < 3 * 1000 * 1000; ++i) bytes.push_back(static_cast<char>(i * 7));
  ProgramResult put = Run("memctl", {"put", "--location", "device:0", "blob", "-"}, bytes);
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(client_->Stat("blob")->location, "device:0");
  ProgramResult get = Run("memctl", {"get", "blob"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.out.size(), bytes.size());
  EXPECT_TRUE(get.out == bytes);
  // And a device buffer another process produced.
  ASSERT_EQ(Client({"device-produce", "p", "1000", "5", "0"}).exit_code, 0);
  EXPECT_EQ(Run("memctl", {"get", "p"}).out.size(), 1000u);
}

// Two GPUs, numbered by each process's CUDA: memd sees both; a client with
// CUDA_VISIBLE_DEVICES=1 sees memd's device:1 as its device 0. Buffers are
// found by the GPU's UUID, whatever the numbers.
class GpuNumberingTest : public CudaTest,
                         public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override { StartDaemon({"--cuda-handles", GetParam()}, kTwoGpus); }

  // What a client process with `visible` as CUDA_VISIBLE_DEVICES runs.
  ProgramResult ClientSeeing(const std::string& visible, std::vector<std::string> args) {
    return Client(std::move(args), {{"MEMD_FAKE_CUDA_DEVICES", "2"},
                                    {"CUDA_VISIBLE_DEVICES", visible}});
  }

  static inline const std::vector<std::pair<std::string, std::string>> kTwoGpus = {
      {"MEMD_FAKE_CUDA_DEVICES", "2"}};
};

TEST_P(GpuNumberingTest, ABufferIsFoundByItsGpuWhateverTheClientCallsIt) {
  // Produced by a process that knows the GPU only as its device 0.
  ProgramResult produced =
      ClientSeeing("1", {"device-produce", "weights", "3000000", "21", "1"});
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
  EXPECT_EQ(client_->Stat("weights")->location, "device:1");
  // Read where it is device 0, device 1 (the same order as memd), and
  // device 0 again in a reversed order.
  for (const char* visible : {"1", "0,1", "1,0"}) {
    ProgramResult consumed =
        ClientSeeing(visible, {"device-consume", "weights", "3000000", "21"});
    EXPECT_EQ(consumed.exit_code, 0) << "CUDA_VISIBLE_DEVICES=" << visible << "\n"
                                     << consumed.out << consumed.err;
  }
  // A process that does not see the GPU is told so, by UUID; no lease stays.
  ProgramResult blind = ClientSeeing("0", {"device-open-without-context", "weights"});
  EXPECT_EQ(blind.out, "FAILED_PRECONDITION\n") << blind.err;
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->devices.size(), 2u);
  EXPECT_THAT(blind.err, HasSubstr("memd's device:1"));
  EXPECT_THAT(blind.err, HasSubstr("does not see GPU " + stats->devices[1].uuid));
  EXPECT_EQ(stats->leases, 0u);
}

TEST_P(GpuNumberingTest, TheClientTranslatesLocationsAndOrdinals) {
  ProgramResult reversed = ClientSeeing("1,0", {"device-numbering", "-"});
  ASSERT_EQ(reversed.exit_code, 0) << reversed.out << reversed.err;
  EXPECT_EQ(reversed.out,
            "device:0 cuda 1\ndevice:1 cuda 0\n"
            "cuda 0 device:1\ncuda 1 device:0\n");
  ProgramResult one = ClientSeeing("1", {"device-numbering", "-"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_EQ(one.out, "device:0 cuda NOT_FOUND\ndevice:1 cuda 0\ncuda 0 device:1\n");
}

TEST_P(GpuNumberingTest, MemctlCopiesThroughTheGpuMemdNames) {
  std::string bytes(2 * 1000 * 1000, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13);
  const std::map<std::string, std::string> sees_one = {
      {"MEMD_FAKE_CUDA_DEVICES", "2"}, {"CUDA_VISIBLE_DEVICES", "1"}};
  ProgramResult put =
      Run("memctl", {"put", "--location", "device:1", "blob", "-"}, bytes, sees_one);
  ASSERT_EQ(put.exit_code, 0) << put.err;
  ProgramResult get = Run("memctl", {"get", "blob"}, "", sees_one);
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_TRUE(get.out == bytes);
  ProgramResult refused = Run("memctl", {"put", "--location", "device:0", "other", "-"},
                              "x", sees_one);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("device:0: this process does not see GPU"));
  EXPECT_FALSE(client_->Stat("other").ok()) << "nothing created";
}

INSTANTIATE_TEST_SUITE_P(Handles, GpuNumberingTest, ::testing::Values("vmm_fd", "ipc"));

TEST_F(CudaTest, AutoTakesCudaWhenADriverIsThereAndHostWhenNot) {
  ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
  auto with = DaemonProcess::Start({"--backend", "auto"});
  ::setenv("MEMD_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  auto without = DaemonProcess::Start({"--backend", "auto"});
  ::unsetenv("MEMD_CUDA_DRIVER");
  ASSERT_TRUE(with.ok() && without.ok());
  auto cuda = Client::Connect({.socket_dir = (*with)->socket_dir()});
  auto host = Client::Connect({.socket_dir = (*without)->socket_dir()});
  ASSERT_TRUE(cuda.ok() && host.ok());
  EXPECT_EQ((*cuda)->Stats()->backend, "cuda");
  EXPECT_EQ((*host)->Stats()->backend, "host");
  EXPECT_TRUE((*host)->Stats()->devices.empty());
  EXPECT_THAT((*without)->Log(), HasSubstr("no CUDA backend (no CUDA driver"));
}

TEST_F(CudaTest, CudaWithoutDevicesRefusesToStartSayingWhy) {
  test::TempDir dir;
  ProgramResult result = RunProgram(
      BinDir() + "/memd",
      {"--socket-dir", dir.Join("run"), "--metrics-address", "", "--backend", "cuda",
       "--cuda-driver", MEMD_FAKE_CUDA_PATH},
      "", {{"MEMD_FAKE_CUDA_DEVICES", "0"}});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--backend cuda"));
  EXPECT_THAT(result.err, HasSubstr("sees no device"));
}

TEST(ShippedBinariesTest, NoneLinksACudaLibrary) {
  for (const char* program : {"memd", "memctl", "memd-example-consumer"}) {
    ProgramResult ldd = RunProgram("/usr/bin/ldd", {BinDir() + "/" + program});
    ASSERT_EQ(ldd.exit_code, 0) << program << ": " << ldd.err;
    EXPECT_THAT(ldd.out, HasSubstr("libc.so"));  // ldd did list libraries.
    EXPECT_THAT(ldd.out, ::testing::Not(HasSubstr("libcuda"))) << program;
    EXPECT_THAT(ldd.out, ::testing::Not(HasSubstr("libcudart"))) << program;
  }
}

}  // namespace
}  // namespace memd
