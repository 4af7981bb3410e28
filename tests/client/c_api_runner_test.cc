// The C API from programs in other languages, each against a real daemon:
// c_api_test.c (compiled as C) and c_api_ctypes.py (Python's ctypes), both
// loading the exported libmemd.so.

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"

namespace memd::test {
namespace {

std::unique_ptr<DaemonProcess> StartDaemon(std::vector<std::string> args = {}) {
  auto daemon = DaemonProcess::Start(std::move(args));
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

// The sanitizer build's libmemd.so needs the sanitizer runtimes loaded first
// in a program that was not built with them (python3).
std::map<std::string, std::string> Environment(const DaemonProcess& daemon) {
  std::map<std::string, std::string> env{{"MEMD_SOCKET_DIR", daemon.socket_dir()}};
  if (std::string(MEMD_SANITIZER_PRELOAD).empty()) return env;
  env["LD_PRELOAD"] = MEMD_SANITIZER_PRELOAD;
  env["ASAN_OPTIONS"] = "detect_leaks=0";  // The interpreter's own are not ours.
  return env;
}

// The program loads the fake CUDA driver, which shows it GPUs a host daemon
// does not serve (GPU numbering's errors, the same on every machine).
TEST(CApiTest, EveryCallAndErrorPathFromC) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  ProgramResult result =
      RunProgram(MEMD_C_API_TEST, {"host"}, "",
                 {{"MEMD_SOCKET_DIR", daemon->socket_dir()},
                  {"MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH}});
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  for (const char* passed :
       {"ok - stats, sessions, usage, leaks and trim: memctl's JSON documents",
        "ok - copy errors, before anything moves",
        "ok - a transfer outlives its client; a copy names its own client's leases",
        "ok - a buffer outlives its client",
        "ok - a file into a host buffer through its kept descriptor",
        "ok - DLPack 1.0: a read-only lease exports marked read-only",
        "ok - DLPack: the deleter calls on_delete once, after letting go of the lease; a failed "
        "export never",
        "ok - DLPack: an options struct of before the hook takes the defaults for the rest"}) {
    EXPECT_NE(result.out.find(passed), std::string::npos) << passed << "\n" << Describe(result);
  }
}

TEST(CApiTest, DeviceBuffersExportCudaTensorsFromC) {
  auto daemon = StartDaemon({"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
  ASSERT_NE(daemon, nullptr);
  ProgramResult result = RunProgram(
      MEMD_C_API_TEST, {"device"}, "",
      {{"MEMD_SOCKET_DIR", daemon->socket_dir()}, {"MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH}});
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_NE(result.out.find("ok - device buffers"), std::string::npos) << Describe(result);
  for (const char* passed : {"ok - GPU numbering: memd's device:0 is this process's CUDA device 0",
                             "ok - copies to and from a device buffer",
                             "ok - an open at a location, a prefetch and a drop",
                             "ok - a writer's sync publishes a new generation"}) {
    EXPECT_NE(result.out.find(passed), std::string::npos) << passed << "\n" << Describe(result);
  }
}

// The daemon's fake driver moves 20 MB/s (MEMD_FAKE_CUDA_LINK_GBPS, read by
// the daemon's fake at its start): a 32 MiB copy outlasts every wait the
// program lets it have.
TEST(CApiTest, WaitsThatRunOutCancelAndDeadlinesFromC) {
  ::setenv("MEMD_FAKE_CUDA_LINK_GBPS", "h2d=0.02,d2h=0.02", 1);
  auto daemon = StartDaemon({"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
  ::unsetenv("MEMD_FAKE_CUDA_LINK_GBPS");
  ASSERT_NE(daemon, nullptr);
  ProgramResult result = RunProgram(
      MEMD_C_API_TEST, {"slow_copy"}, "",
      {{"MEMD_SOCKET_DIR", daemon->socket_dir()}, {"MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH}});
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_NE(result.out.find("ok - freeing a transfer leaves its copy running"),
            std::string::npos)
      << Describe(result);
}

// The fake Level Zero driver under the real loader, in the daemon and in
// the C program (the loader reads ZE_ENABLE_ALT_DRIVERS in each process).
TEST(CApiTest, LevelZeroBuffersExportOneApiTensorsFromC) {
  ::setenv("ZE_ENABLE_ALT_DRIVERS", MEMD_FAKE_ZE_PATH, 1);
  auto daemon = StartDaemon({"--backend", "level_zero"});
  ::unsetenv("ZE_ENABLE_ALT_DRIVERS");
  ASSERT_NE(daemon, nullptr);
  ProgramResult result = RunProgram(
      MEMD_C_API_TEST, {"level_zero"}, "",
      {{"MEMD_SOCKET_DIR", daemon->socket_dir()}, {"ZE_ENABLE_ALT_DRIVERS", MEMD_FAKE_ZE_PATH}});
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_NE(result.out.find("ok - Level Zero device buffers"), std::string::npos)
      << Describe(result);
}

TEST(CApiTest, PythonCtypesCallsTheLibrary) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  ProgramResult result = RunProgram("/usr/bin/python3", {MEMD_CTYPES_TEST, MEMD_LIBRARY}, "",
                                    Environment(*daemon));
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_NE(result.out.find("ctypes: ok"), std::string::npos) << Describe(result);
}

}  // namespace
}  // namespace memd::test
