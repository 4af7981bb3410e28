// On a node with a real NVIDIA GPU and driver (tools/gpu-check runs these):
// memd on the real CUDA driver, a device buffer written in one process and
// read in another. Everywhere else each test skips and says why.

#include <map>
#include <memory>
#include <string>

#include "common/cuda/driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"

namespace memd {
namespace {

using testing::BinDir;
using testing::DaemonProcess;
using testing::ProgramResult;
using testing::RunProgram;

// Why this machine cannot run the GPU tests, or empty when it can.
std::string WhyNoGpu() {
  auto driver = cuda::Driver::Load("libcuda.so.1");
  if (!driver.ok()) return std::string(driver.status().message());
  int count = 0;
  if ((*driver)->api().DeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    return "the CUDA driver sees no device";
  }
  return "";
}

class RealGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = WhyNoGpu(); !why.empty()) {
      GTEST_SKIP() << "no GPU here (" << why << "); tools/gpu-check runs this on a GPU node";
    }
  }
};

TEST_F(RealGpuTest, DeviceBufferCrossesProcessesOnTheRealDriver) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto env = std::map<std::string, std::string>{
      {"MEMD_SOCKET_DIR", (*daemon)->socket_dir()}, {"MEMD_CUDA_DRIVER", "libcuda.so.1"}};
  ProgramResult produced = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-produce", "gpu/w", "8000000", "9", "0"}, "", env);
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/w", "8000000", "9"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
}

TEST_F(RealGpuTest, LegacyIpcHandlesOnTheRealDriver) {
  auto daemon = DaemonProcess::Start(
      {"--backend", "cuda", "--cuda-driver", "libcuda.so.1", "--cuda-handles", "ipc"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto env = std::map<std::string, std::string>{
      {"MEMD_SOCKET_DIR", (*daemon)->socket_dir()}, {"MEMD_CUDA_DRIVER", "libcuda.so.1"}};
  ASSERT_EQ(RunProgram(BinDir() + "/memd-test-client",
                       {"device-produce", "gpu/i", "3000000", "4", "0"}, "", env)
                .exit_code,
            0);
  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/i", "3000000", "4"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
}

TEST_F(RealGpuTest, DevicesAreListed) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_FALSE(stats->devices.empty());
  EXPECT_GT(stats->devices[0].total_bytes, 0u);
  EXPECT_THAT(stats->devices[0].uuid, ::testing::StartsWith("GPU-"));
}

}  // namespace
}  // namespace memd
