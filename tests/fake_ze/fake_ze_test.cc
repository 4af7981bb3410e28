// Tests for the memd FAKE Level Zero driver (libmemd_fake_ze.so), loaded the
// way memd loads it: through the REAL loader (libze_loader.so.1) with
// ZE_ENABLE_ALT_DRIVERS naming it. The loader reads its environment once per
// process, so each scenario runs in a fork+exec'ed fake_ze_scenarios process
// (fake_ze_scenarios_*.cc) with the environment the test gives it, and every
// scenario runs twice: with the loader passing calls straight to the driver,
// and with ZE_ENABLE_LOADER_INTERCEPT=1 (the loader wraps every handle).

#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern char** environ;

namespace {

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together.
};

// Whether `entry` ("NAME=value") sets one of the variables `extra` sets.
bool SetByExtra(const char* entry, const std::vector<std::string>& extra) {
  for (const std::string& e : extra) {
    size_t name = e.find('=') + 1;  // Compare "NAME=".
    if (std::strncmp(entry, e.c_str(), name) == 0) return true;
  }
  return false;
}

// This process's environment without any MEMD_FAKE_ZE_ or ZE_ variable (nor
// one `extra` sets), then the loader pointed at the fake, the mode, `extra`.
std::vector<std::string> ChildEnvironment(bool intercept, const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "MEMD_FAKE_ZE_", 13) == 0 || std::strncmp(*entry, "ZE_", 3) == 0 ||
        SetByExtra(*entry, extra)) {
      continue;
    }
    env.push_back(*entry);
  }
  env.push_back(std::string("ZE_ENABLE_ALT_DRIVERS=") + MEMD_FAKE_ZE_PATH);
  if (intercept) env.push_back("ZE_ENABLE_LOADER_INTERCEPT=1");
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

Result RunScenario(const std::string& name, bool intercept, const std::vector<std::string>& extra) {
  std::vector<std::string> env = ChildEnvironment(intercept, extra);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=Scenario." + name;
  char* argv[] = {const_cast<char*>("fake_ze_scenarios"), filter.data(), nullptr};
  int out[2];
  Result result;
  if (pipe(out) != 0) return result;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    close(out[1]);
    execve(MEMD_FAKE_ZE_SCENARIOS_PATH, argv, envp.data());
    _exit(127);
  }
  close(out[1]);
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof(buffer))) > 0;) result.output.append(buffer, n);
  close(out[0]);
  if (pid > 0) waitpid(pid, &result.status, 0);
  return result;
}

class FakeZeTest : public ::testing::TestWithParam<bool> {
 protected:
  Result Run(const std::string& name, const std::vector<std::string>& env = {}) {
    return RunScenario(name, GetParam(), env);
  }
  // The scenario ran (not filtered away, not skipped) and passed.
  void ExpectPasses(const std::string& name, const std::vector<std::string>& env = {}) {
    Result result = Run(name, env);
    EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0)
        << name << " status " << result.status << "\n" << result.output;
    EXPECT_NE(result.output.find("[  PASSED  ] 1 test."), std::string::npos)
        << name << "\n" << result.output;
  }
};

INSTANTIATE_TEST_SUITE_P(LoaderModes, FakeZeTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Intercept" : "PassThrough";
                         });

TEST_P(FakeZeTest, LoaderFindsTheConfiguredDevices) {
  ExpectPasses("Discovery");
  ExpectPasses("Discovery", {"MEMD_FAKE_ZE_DEVICES=3"});
  ExpectPasses("Discovery", {"MEMD_FAKE_ZE_DEVICES=16"});
  ExpectPasses("Discovery", {"MEMD_FAKE_ZE_DEVICES=0"});
}

TEST_P(FakeZeTest, DevicePropertiesUuidPciMemory) {
  ExpectPasses("DeviceProperties", {"MEMD_FAKE_ZE_DEVICES=2", "MEMD_FAKE_ZE_MEMORY=67108864"});
}

TEST_P(FakeZeTest, QueueGroups) { ExpectPasses("QueueGroups"); }

TEST_P(FakeZeTest, DeviceMemoryLimitsAndFree) {
  ExpectPasses("DeviceMemoryLimitsAndFree", {"MEMD_FAKE_ZE_MEMORY=4194304"});
  ExpectPasses("DeviceMemoryLimitsAndFree",
               {"MEMD_FAKE_ZE_MEMORY=4194304", "MEMD_FAKE_ZE_POOL_OFFSET=65536"});
}

TEST_P(FakeZeTest, DevicePointerIsNotHostReadable) {
  // Under AddressSanitizer the signal must reach the process, not ASan's report.
  Result result = Run("DereferenceDevicePointer", {"ASAN_OPTIONS=handle_segv=0"});
  EXPECT_TRUE(WIFSIGNALED(result.status) && WTERMSIG(result.status) == SIGSEGV)
      << "status " << result.status << "\n" << result.output;
  EXPECT_NE(result.output.find("about to read"), std::string::npos) << result.output;
}

TEST_P(FakeZeTest, HostMemory) { ExpectPasses("HostMemory"); }

TEST_P(FakeZeTest, ContextsAreSeparate) { ExpectPasses("ContextsAreSeparate"); }

TEST_P(FakeZeTest, ArgumentErrors) { ExpectPasses("ArgumentErrors"); }

TEST_P(FakeZeTest, InitErrorIsReturned) {
  ExpectPasses("InitFails", {"MEMD_FAKE_ZE_INIT_ERROR=0x70000001", "FAKE_ZE_EXPECT_INIT=0x70000001"});
  ExpectPasses("InitFails", {"MEMD_FAKE_ZE_INIT_ERROR=2013265921",  // 0x78000001 in decimal.
                             "FAKE_ZE_EXPECT_INIT=0x78000001"});
}

TEST_P(FakeZeTest, MalformedConfigurationFailsInit) {
  const char* malformed[] = {
      "MEMD_FAKE_ZE_DEVICES=17",         "MEMD_FAKE_ZE_DEVICES=one",
      "MEMD_FAKE_ZE_DEVICES=-1",         "MEMD_FAKE_ZE_MEMORY=0",
      "MEMD_FAKE_ZE_MEMORY=1G",          "MEMD_FAKE_ZE_IPC_CACHE=2",
      "MEMD_FAKE_ZE_POOL_OFFSET=100",    "MEMD_FAKE_ZE_POOL_OFFSET=2097152",
      "MEMD_FAKE_ZE_INIT_ERROR=0x1234",  "MEMD_FAKE_ZE_INIT_ERROR=abc",
      "MEMD_FAKE_ZE_POISON=yes",         "MEMD_FAKE_ZE_COPY_LATENCY_US=10000001",
      "MEMD_FAKE_ZE_FAULTS=zeBogus@1=0x78000004",
      "MEMD_FAKE_ZE_FAULTS=zeInit@1=0x78000004",
      "MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@0=0x78000004",
      "MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@1=0x12345678",
      "MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@1=0",
      "MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@1=0x78000004;",
      "MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice=0x78000004",
  };
  for (const char* entry : malformed) {
    SCOPED_TRACE(entry);
    Result result = Run("InitFails", {entry, "FAKE_ZE_EXPECT_INIT=0x78000004"});
    EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0) << result.output;
    std::string name(entry, std::strchr(entry, '=') - entry);
    EXPECT_NE(result.output.find("memd fake Level Zero driver: " + name), std::string::npos)
        << result.output;
  }
}

TEST_P(FakeZeTest, FaultsFailTheNthCall) {
  ExpectPasses("Faults",
               {"MEMD_FAKE_ZE_FAULTS=zeMemAllocDevice@2=0x70000002;zeMemGetIpcHandle@1=0x78000004"});
}

TEST_P(FakeZeTest, IpcAcrossProcesses) {
  for (const char* cache : {"MEMD_FAKE_ZE_IPC_CACHE=1", "MEMD_FAKE_ZE_IPC_CACHE=0"}) {
    for (const char* offset : {"MEMD_FAKE_ZE_POOL_OFFSET=0", "MEMD_FAKE_ZE_POOL_OFFSET=8192"}) {
      SCOPED_TRACE(std::string(cache) + " " + offset);
      ExpectPasses("IpcAcrossProcesses", {cache, offset});
    }
  }
}

TEST_P(FakeZeTest, IpcInSameProcess) {
  ExpectPasses("IpcInSameProcess", {"MEMD_FAKE_ZE_DEVICES=2", "MEMD_FAKE_ZE_POOL_OFFSET=1044480"});
  ExpectPasses("IpcInSameProcess", {"MEMD_FAKE_ZE_DEVICES=2", "MEMD_FAKE_ZE_IPC_CACHE=0"});
}

TEST_P(FakeZeTest, IpcCacheReturnsTheSameDriverOwnedFd) { ExpectPasses("IpcCacheOn"); }

TEST_P(FakeZeTest, IpcWithoutCacheReturnsFreshCallerOwnedFds) {
  ExpectPasses("IpcCacheOff", {"MEMD_FAKE_ZE_IPC_CACHE=0"});
}

TEST_P(FakeZeTest, ClosingTheCachedFdIsReported) {
  Result result = Run("IpcCachedFdClosedByCaller");
  EXPECT_TRUE(WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0) << result.output;
  EXPECT_NE(result.output.find("was closed by its caller"), std::string::npos) << result.output;
}

TEST_P(FakeZeTest, ImmediateCopyAndFill) {
  ExpectPasses("ImmediateCopyAndFill");
  ExpectPasses("ImmediateCopyAndFill",
               {"MEMD_FAKE_ZE_POISON=1", "MEMD_FAKE_ZE_COPY_LATENCY_US=20000"});
}

TEST_P(FakeZeTest, RegularListQueueAndFence) {
  ExpectPasses("RegularListQueueAndFence");
  ExpectPasses("RegularListQueueAndFence",
               {"MEMD_FAKE_ZE_POISON=1", "MEMD_FAKE_ZE_COPY_LATENCY_US=20000"});
}

TEST_P(FakeZeTest, PoisonUntilTheCopyCompletes) {
  ExpectPasses("PoisonUntilComplete",
               {"MEMD_FAKE_ZE_POISON=1", "MEMD_FAKE_ZE_COPY_LATENCY_US=300000"});
}

TEST_P(FakeZeTest, SynchronousAndAsynchronousModes) {
  ExpectPasses("SynchronousAndAsynchronousModes", {"MEMD_FAKE_ZE_COPY_LATENCY_US=200000"});
}

TEST_P(FakeZeTest, EventsOrderWork) { ExpectPasses("EventsOrderWork"); }

TEST_P(FakeZeTest, ExitWithPendingWorkDoesNotHang) {
  auto start = std::chrono::steady_clock::now();
  ExpectPasses("ExitWithPendingWork", {"MEMD_FAKE_ZE_COPY_LATENCY_US=5000000"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

// Without the loader: the table getters and the state before zeInit. The
// test process never loads the fake otherwise, so this load is fresh.
TEST(FakeZeDirectTest, TableGettersAndUninitializedCalls) {
  void* fake = dlopen(MEMD_FAKE_ZE_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  auto get_mem = reinterpret_cast<ze_pfnGetMemProcAddrTable_t>(dlsym(fake, "zeGetMemProcAddrTable"));
  auto get_device =
      reinterpret_cast<ze_pfnGetDeviceProcAddrTable_t>(dlsym(fake, "zeGetDeviceProcAddrTable"));
  ASSERT_NE(get_mem, nullptr);
  ASSERT_NE(get_device, nullptr);
  EXPECT_EQ(dlsym(fake, "zeMemAllocDevice"), nullptr) << "only the getters and hooks are exported";
  ze_mem_dditable_t mem{};
  EXPECT_EQ(get_mem(ZE_API_VERSION_1_4, nullptr), ZE_RESULT_ERROR_INVALID_NULL_POINTER);
  EXPECT_EQ(get_mem(static_cast<ze_api_version_t>(ZE_MAKE_VERSION(2, 0)), &mem),
            ZE_RESULT_ERROR_UNSUPPORTED_VERSION);
  // A newer minor than the headers know is fine (loader 1.32 asks for 1.17).
  ASSERT_EQ(get_mem(static_cast<ze_api_version_t>(ZE_MAKE_VERSION(1, 17)), &mem),
            ZE_RESULT_SUCCESS);
  ASSERT_NE(mem.pfnAllocDevice, nullptr);
  EXPECT_EQ(mem.pfnFreeExt, nullptr) << "not implemented: left empty";
  ze_device_dditable_t device{};
  ASSERT_EQ(get_device(ZE_API_VERSION_1_2, &device), ZE_RESULT_SUCCESS);
  EXPECT_EQ(device.pfnPciGetPropertiesExt, nullptr) << "introduced in 1.3";
  ASSERT_EQ(get_device(ZE_API_VERSION_1_3, &device), ZE_RESULT_SUCCESS);
  EXPECT_NE(device.pfnPciGetPropertiesExt, nullptr);
  // Before zeInit, every call is UNINITIALIZED.
  ze_device_mem_alloc_desc_t desc{};
  desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
  void* ptr = nullptr;
  EXPECT_EQ(mem.pfnAllocDevice(nullptr, &desc, 4096, 0, nullptr, &ptr),
            ZE_RESULT_ERROR_UNINITIALIZED);
  uint32_t count = 0;
  EXPECT_EQ(device.pfnGet(nullptr, &count, nullptr), ZE_RESULT_ERROR_UNINITIALIZED);
  EXPECT_EQ(dlclose(fake), 0);
  EXPECT_EQ(dlopen(MEMD_FAKE_ZE_PATH, RTLD_NOW | RTLD_NOLOAD), nullptr) << "unloaded";
}

}  // namespace
