// The scenario fixture of fake_ze_test (see fake_ze_scenario.h).

#include "tests/fake_ze/fake_ze_scenario.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace memd::fake_ze_test {

std::vector<unsigned char> Pattern(size_t size, unsigned seed) {
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>((i * 31 + seed) & 0xff);
  return bytes;
}

bool InterceptMode() {
  const char* value = std::getenv("ZE_ENABLE_LOADER_INTERCEPT");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? std::strtoull(value, nullptr, 0) : fallback;
}

int RunChildScenario(const std::string& name, const std::vector<std::string>& env, int keep_fd) {
  std::string filter = "--gtest_filter=Scenario." + name;
  pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& entry : env) putenv(const_cast<char*>(entry.c_str()));
    if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
    execl("/proc/self/exe", "fake_ze_scenarios", filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  if (pid > 0) waitpid(pid, &status, 0);
  return status;
}

void Scenario::SetUp() {
  ASSERT_NE(std::getenv("ZE_ENABLE_ALT_DRIVERS"), nullptr)
      << "run by fake_ze_test, which points the loader at the fake";
  loader_ = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(loader_, nullptr) << dlerror();
#define MEMD_FAKE_ZE_TEST_RESOLVE(name)                                    \
  ze.name = reinterpret_cast<decltype(ze.name)>(dlsym(loader_, #name)); \
  ASSERT_NE(ze.name, nullptr) << #name;
  MEMD_FAKE_ZE_TEST_API(MEMD_FAKE_ZE_TEST_RESOLVE)
#undef MEMD_FAKE_ZE_TEST_RESOLVE
}

// The loader stays loaded: unloading it runs its teardown, which is not
// what a scenario tests (the process exits next anyway).
void Scenario::TearDown() {}

void Scenario::Start() {
  ASSERT_EQ(ze.zeInit(0), ZE_RESULT_SUCCESS);
  uint32_t count = 0;
  ASSERT_EQ(ze.zeDriverGet(&count, nullptr), ZE_RESULT_SUCCESS);
  ASSERT_EQ(count, 1u);
  ASSERT_EQ(ze.zeDriverGet(&count, &driver), ZE_RESULT_SUCCESS);
  count = 0;
  ASSERT_EQ(ze.zeDeviceGet(driver, &count, nullptr), ZE_RESULT_SUCCESS);
  devices.resize(count);
  if (count > 0) {
    ASSERT_EQ(ze.zeDeviceGet(driver, &count, devices.data()), ZE_RESULT_SUCCESS);
  }
  ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ASSERT_EQ(ze.zeContextCreate(driver, &desc, &context), ZE_RESULT_SUCCESS);
}

struct memd_fake_ze_counters Scenario::Counters() {
  struct memd_fake_ze_counters counters {};
  // The loader opened the fake RTLD_LOCAL: its hooks are reached by handle.
  void* fake = dlopen(MEMD_FAKE_ZE_PATH, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(fake, nullptr) << "the loader did not load " MEMD_FAKE_ZE_PATH;
  if (fake == nullptr) return counters;
  auto hook = reinterpret_cast<int (*)(struct memd_fake_ze_counters*)>(
      dlsym(fake, "memd_fake_ze_counters"));
  EXPECT_NE(hook, nullptr);
  if (hook != nullptr) {
    EXPECT_EQ(hook(&counters), 0);
  }
  dlclose(fake);
  return counters;
}

void Scenario::DestroyContextAndExpectNoLeaks() {
  ASSERT_EQ(ze.zeContextDestroy(context), ZE_RESULT_SUCCESS);
  context = nullptr;
  struct memd_fake_ze_counters c = Counters();
  EXPECT_EQ(c.contexts, 0u);
  EXPECT_EQ(c.device_allocations, 0u);
  EXPECT_EQ(c.host_allocations, 0u);
  EXPECT_EQ(c.device_bytes_total, 0u);
  EXPECT_EQ(c.ipc_opened, 0u);
  EXPECT_EQ(c.cached_fds, 0u);
  EXPECT_EQ(c.event_pools, 0u);
  EXPECT_EQ(c.events, 0u);
  EXPECT_EQ(c.command_lists, 0u);
  EXPECT_EQ(c.command_queues, 0u);
  EXPECT_EQ(c.fences, 0u);
  EXPECT_EQ(c.pending_commands, 0u);
  EXPECT_EQ(c.worker_threads, 0u);
  EXPECT_EQ(c.cached_fd_misuse, 0u);
}

ze_command_list_handle_t Scenario::NewImmediateList(ze_command_queue_mode_t mode,
                                                    uint32_t ordinal) {
  auto desc = Desc<ze_command_queue_desc_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC);
  desc.ordinal = ordinal;
  desc.mode = mode;
  ze_command_list_handle_t list = nullptr;
  EXPECT_EQ(ze.zeCommandListCreateImmediate(context, devices.at(0), &desc, &list),
            ZE_RESULT_SUCCESS);
  return list;
}

ze_event_pool_handle_t Scenario::NewEventPool(uint32_t count) {
  ze_event_pool_desc_t desc{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr,
                            ZE_EVENT_POOL_FLAG_HOST_VISIBLE, count};
  ze_event_pool_handle_t pool = nullptr;
  EXPECT_EQ(ze.zeEventPoolCreate(context, &desc, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
  return pool;
}

ze_event_handle_t Scenario::NewEvent(ze_event_pool_handle_t pool, uint32_t index) {
  ze_event_desc_t desc{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, index, ZE_EVENT_SCOPE_FLAG_HOST,
                       ZE_EVENT_SCOPE_FLAG_HOST};
  ze_event_handle_t event = nullptr;
  EXPECT_EQ(ze.zeEventCreate(pool, &desc, &event), ZE_RESULT_SUCCESS);
  return event;
}

void* Scenario::NewDeviceMemory(size_t size, int device) {
  auto desc = Desc<ze_device_mem_alloc_desc_t>(ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC);
  void* ptr = nullptr;
  EXPECT_EQ(ze.zeMemAllocDevice(context, &desc, size, 0, devices.at(static_cast<size_t>(device)),
                                &ptr),
            ZE_RESULT_SUCCESS);
  return ptr;
}

void Scenario::CopyAndWait(void* dst, const void* src, size_t size) {
  ze_command_list_handle_t list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ze_event_pool_handle_t pool = NewEventPool(1);
  ze_event_handle_t done = NewEvent(pool, 0);
  EXPECT_EQ(ze.zeCommandListAppendMemoryCopy(list, dst, src, size, done, 0, nullptr),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventHostSynchronize(done, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventDestroy(done), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(list), ZE_RESULT_SUCCESS);
}

void Scenario::Upload(void* device_ptr, const std::vector<unsigned char>& bytes) {
  CopyAndWait(device_ptr, bytes.data(), bytes.size());
}

std::vector<unsigned char> Scenario::Download(const void* device_ptr, size_t size) {
  std::vector<unsigned char> bytes(size);
  CopyAndWait(bytes.data(), device_ptr, size);
  return bytes;
}

}  // namespace memd::fake_ze_test
