#include "tests/daemon/backend/ze_copy_fixture.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "gmock/gmock.h"
#include "tests/support/run_program.h"

namespace memd::backend {
namespace {

constexpr char kChild[] = "MEMD_ZE_COPY_TEST_CHILD";

}  // namespace

FakeCounters Counters() {
  FakeCounters counters{};
  // The loader opened the fake RTLD_LOCAL: reach its hook by path.
  void* fake = ::dlopen(MEMD_FAKE_ZE_PATH, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(fake, nullptr) << "the fake is not loaded";
  if (fake == nullptr) return counters;
  auto hook = reinterpret_cast<int (*)(FakeCounters*)>(::dlsym(fake, "memd_fake_ze_counters"));
  EXPECT_NE(hook, nullptr);
  if (hook != nullptr) hook(&counters);
  ::dlclose(fake);
  return counters;
}

void ExpectSameLiveObjects(const FakeCounters& now, const FakeCounters& before) {
  EXPECT_EQ(now.events, before.events);
  EXPECT_EQ(now.event_pools, before.event_pools);
  EXPECT_EQ(now.command_lists, before.command_lists);
  EXPECT_EQ(now.host_allocations, before.host_allocations);
  EXPECT_EQ(now.pending_commands, before.pending_commands);
  EXPECT_EQ(now.worker_threads, before.worker_threads);
}

bool ZeCopyDeviceTest::Start(Env env, ZeCopyDevice::Options options) {
  const char* child = std::getenv(kChild);
  if (child == nullptr || std::string(child) != "1") {
    RunInChild(std::move(env));
    return false;
  }
  in_child_ = true;
  auto loader = ze::Loader::Load();
  EXPECT_TRUE(loader.ok()) << loader.status();
  if (!loader.ok()) return false;
  loader_ = *std::move(loader);
  auto backend = ZeBackend::Create(loader_);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return false;
  backend_ = *std::move(backend);
  before_ = Counters();
  for (const DeviceInfo& info : backend_->devices()) {
    auto device =
        ZeCopyDevice::Create(loader_, loader_->gpus()[info.ordinal], info.ordinal, options);
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return false;
    devices_.push_back(*std::move(device));
  }
  return true;
}

void ZeCopyDeviceTest::TearDown() {
  if (!in_child_) return;
  streams_.clear();
  devices_.clear();
  if (check_leaks_ && backend_ != nullptr) ExpectSameLiveObjects(Counters(), before_);
  segments_.clear();
  backend_.reset();
  loader_.reset();
}

void ZeCopyDeviceTest::RunInChild(Env env) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(test->test_suite_name()) + "." + test->name();
  for (const char* variable :
       {"MEMD_FAKE_ZE_DEVICES", "MEMD_FAKE_ZE_MEMORY", "MEMD_FAKE_ZE_IPC_CACHE",
        "MEMD_FAKE_ZE_POOL_OFFSET", "MEMD_FAKE_ZE_INIT_ERROR", "MEMD_FAKE_ZE_FAULTS",
        "MEMD_FAKE_ZE_POISON", "MEMD_FAKE_ZE_COPY_LATENCY_US"}) {
    env.emplace(variable, "");  // The fake reads an empty value as unset.
  }
  env[kChild] = "1";
  env["ZE_ENABLE_ALT_DRIVERS"] = MEMD_FAKE_ZE_PATH;
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  test::ProgramResult result =
      test::RunProgram(self, {"--gtest_filter=" + name}, "", env, absl::Seconds(120));
  EXPECT_EQ(result.exit_code, 0) << test::Describe(result);
  // It ran the test, rather than filtering it away or skipping it.
  EXPECT_THAT(result.out, ::testing::HasSubstr("[  PASSED  ] 1 test."))
      << test::Describe(result);
}

SegmentMemory ZeCopyDeviceTest::Reserve(const Location& location, std::uint64_t bytes) {
  return ReserveInto(*backend_, location, bytes, segments_);
}

CopyStream& ZeCopyDeviceTest::NewStream(int device) {
  auto stream = devices_[device]->NewStream();
  EXPECT_TRUE(stream.ok()) << stream.status();
  streams_.push_back(*std::move(stream));
  return *streams_.back();
}

std::span<std::byte> ZeCopyDeviceTest::Staging(std::uint64_t bytes, int device) {
  auto staging = devices_[device]->AllocateStaging(bytes);
  EXPECT_TRUE(staging.ok()) << staging.status();
  return staging.ok() ? *staging : std::span<std::byte>();
}

std::vector<std::byte> ZeCopyDeviceTest::ReadBack(CopyStream& stream, DeviceAddress source,
                                                  std::size_t size) {
  std::vector<std::byte> bytes(size);
  EXPECT_TRUE(stream.DeviceToHost(bytes.data(), source, size).ok());
  EXPECT_TRUE(stream.Synchronize().ok());
  return bytes;
}

const std::vector<std::byte>& ZeCopyDeviceTest::Kept(std::vector<std::byte> bytes) {
  kept_.push_back(std::move(bytes));
  return kept_.back();
}

}  // namespace memd::backend
