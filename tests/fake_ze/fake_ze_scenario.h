#pragma once

// The scenarios of fake_ze_test, each run in a process of its own (the
// Level Zero loader reads its environment once per process): the fixture
// that loads the REAL loader with dlopen, resolves the ze* functions from it,
// initialises, and checks the fake's counters for leaks at the end.
// fake_ze_test.cc starts them; a scenario may start more of them itself
// (the importer of an IPC handle, a process that must crash).

#include <dlfcn.h>
#include <level_zero/ze_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fake_ze/fake_ze_hooks.h"

namespace memd::fake_ze_test {

// Every function the scenarios call, resolved from libze_loader.so.1.
#define MEMD_FAKE_ZE_TEST_API(X)                                                            \
  X(zeInit) X(zeDriverGet) X(zeDriverGetApiVersion) X(zeDriverGetProperties)               \
  X(zeDriverGetIpcProperties) X(zeDriverGetExtensionProperties) X(zeDeviceGet)             \
  X(zeDeviceGetSubDevices) X(zeDeviceGetProperties) X(zeDeviceGetCommandQueueGroupProperties) \
  X(zeDeviceGetMemoryProperties) X(zeDevicePciGetPropertiesExt) X(zeContextCreate)         \
  X(zeContextDestroy) X(zeContextGetStatus) X(zeMemAllocDevice) X(zeMemAllocHost)          \
  X(zeMemAllocShared) X(zeMemFree) X(zeMemGetAllocProperties) X(zeMemGetAddressRange)      \
  X(zeMemGetIpcHandle) X(zeMemOpenIpcHandle) X(zeMemCloseIpcHandle) X(zeEventPoolCreate)   \
  X(zeEventPoolDestroy) X(zeEventCreate) X(zeEventDestroy) X(zeEventHostSignal)            \
  X(zeEventHostSynchronize) X(zeEventQueryStatus) X(zeEventHostReset) X(zeFenceCreate)     \
  X(zeFenceDestroy) X(zeFenceHostSynchronize) X(zeFenceQueryStatus) X(zeFenceReset)        \
  X(zeCommandQueueCreate) X(zeCommandQueueDestroy) X(zeCommandQueueExecuteCommandLists)    \
  X(zeCommandQueueSynchronize) X(zeCommandListCreate) X(zeCommandListCreateImmediate)      \
  X(zeCommandListDestroy) X(zeCommandListClose) X(zeCommandListReset)                      \
  X(zeCommandListAppendBarrier) X(zeCommandListAppendMemoryCopy)                           \
  X(zeCommandListAppendMemoryFill) X(zeCommandListAppendSignalEvent)                       \
  X(zeCommandListAppendWaitOnEvents) X(zeCommandListAppendEventReset)

struct ZeApi {
#define MEMD_FAKE_ZE_TEST_FIELD(name) decltype(&::name) name = nullptr;
  MEMD_FAKE_ZE_TEST_API(MEMD_FAKE_ZE_TEST_FIELD)
#undef MEMD_FAKE_ZE_TEST_FIELD
};

// A zeroed descriptor or properties struct of type `stype`, extended by `next`.
template <typename T>
T Desc(ze_structure_type_t stype, void* next = nullptr) {
  T value{};
  value.stype = stype;
  value.pNext = next;
  return value;
}

constexpr uint64_t kForever = UINT64_MAX;
constexpr uint64_t kSecondNs = 1000000000;

// The bytes i * 31 + seed, for contents a test can tell apart.
std::vector<unsigned char> Pattern(size_t size, unsigned seed);

// Whether the loader wraps handles in this process (ZE_ENABLE_LOADER_INTERCEPT=1).
bool InterceptMode();

// An unsigned number from the environment, or `fallback` when unset.
uint64_t EnvNumber(const char* name, uint64_t fallback);

// Runs the scenario `name` of this binary in a fork+exec'ed child, with
// `env` ("NAME=value") added to this process's environment and `keep_fd`
// (if >= 0) left open across exec. Returns the wait status.
int RunChildScenario(const std::string& name, const std::vector<std::string>& env,
                     int keep_fd = -1);

class Scenario : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // zeInit, the driver, its devices and one context.
  void Start();
  // The fake's counters, through its hook (the fake must be loaded).
  struct memd_fake_ze_counters Counters();
  // Destroys the context and checks that the fake holds nothing any more.
  void DestroyContextAndExpectNoLeaks();

  ze_command_list_handle_t NewImmediateList(ze_command_queue_mode_t mode, uint32_t ordinal = 0);
  ze_event_pool_handle_t NewEventPool(uint32_t count);
  ze_event_handle_t NewEvent(ze_event_pool_handle_t pool, uint32_t index);
  void* NewDeviceMemory(size_t size, int device = 0);
  // Copies through an immediate list and waits for the event of the copy.
  void CopyAndWait(void* dst, const void* src, size_t size);
  // Fills device memory with `bytes`, by a copy.
  void Upload(void* device_ptr, const std::vector<unsigned char>& bytes);
  std::vector<unsigned char> Download(const void* device_ptr, size_t size);

  void* loader_ = nullptr;
  ZeApi ze;
  ze_driver_handle_t driver = nullptr;
  std::vector<ze_device_handle_t> devices;
  ze_context_handle_t context = nullptr;
};

}  // namespace memd::fake_ze_test
