// Scenarios: command lists, queues, events and fences, and the asynchrony
// that makes a caller who forgets to wait fail (latency and poison).

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/fake_ze/fake_ze_scenario.h"

namespace memd::fake_ze_test {
namespace {

constexpr size_t kSize = 64 * 1024 + 3;

using Clock = std::chrono::steady_clock;

// Host to device to host through one immediate list, ordered by events.
TEST_F(Scenario, ImmediateCopyAndFill) {
  Start();
  void* device = NewDeviceMemory(kSize);
  ze_command_list_handle_t list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ze_event_pool_handle_t pool = NewEventPool(3);
  ze_event_handle_t uploaded = NewEvent(pool, 0);
  ze_event_handle_t filled = NewEvent(pool, 1);
  ze_event_handle_t downloaded = NewEvent(pool, 2);
  std::vector<unsigned char> source = Pattern(kSize, 3);
  std::vector<unsigned char> back(kSize, 0);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, device, source.data(), kSize, uploaded, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  const uint32_t pattern = 0xdeadbeef;
  ASSERT_EQ(ze.zeCommandListAppendMemoryFill(list, static_cast<char*>(device) + 100, &pattern, 4,
                                             1001, filled, 1, &uploaded),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, back.data(), device, kSize, downloaded, 1,
                                             &filled),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeEventHostSynchronize(downloaded, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventQueryStatus(uploaded), ZE_RESULT_SUCCESS);
  std::vector<unsigned char> expected = source;
  for (size_t i = 0; i < 1001; ++i) {
    expected[100 + i] = reinterpret_cast<const unsigned char*>(&pattern)[i % 4];
  }
  EXPECT_EQ(back, expected);
  // Patterns: a power of two up to the group's maxMemoryFillPatternSize (16).
  unsigned char wide[32] = {};
  EXPECT_EQ(ze.zeCommandListAppendMemoryFill(list, device, wide, 3, 64, nullptr, 0, nullptr),
            ZE_RESULT_ERROR_INVALID_SIZE);
  EXPECT_EQ(ze.zeCommandListAppendMemoryFill(list, device, wide, 32, 64, nullptr, 0, nullptr),
            ZE_RESULT_ERROR_INVALID_SIZE);
  // A range running out of its allocation.
  EXPECT_EQ(ze.zeCommandListAppendMemoryCopy(list, back.data(), static_cast<char*>(device) + 1,
                                             kSize, nullptr, 0, nullptr),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  for (ze_event_handle_t event : {uploaded, filled, downloaded}) {
    EXPECT_EQ(ze.zeEventDestroy(event), ZE_RESULT_SUCCESS);
  }
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// A regular list on the copy group, executed twice by a queue with a fence.
TEST_F(Scenario, RegularListQueueAndFence) {
  Start();
  void* device = NewDeviceMemory(kSize);
  auto queue_desc = Desc<ze_command_queue_desc_t>(ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC);
  queue_desc.ordinal = 1;
  queue_desc.index = 1;
  queue_desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
  ze_command_queue_handle_t queue = nullptr;
  ASSERT_EQ(ze.zeCommandQueueCreate(context, devices[0], &queue_desc, &queue), ZE_RESULT_SUCCESS);
  ze_command_list_desc_t list_desc{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 1, 0};
  ze_command_list_handle_t list = nullptr;
  ASSERT_EQ(ze.zeCommandListCreate(context, devices[0], &list_desc, &list), ZE_RESULT_SUCCESS);
  std::vector<unsigned char> source = Pattern(kSize, 9);
  std::vector<unsigned char> back(kSize, 0);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, device, source.data(), kSize, nullptr, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendBarrier(list, nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, back.data(), device, kSize, nullptr, 0, nullptr),
            ZE_RESULT_SUCCESS);
  auto fence_desc = Desc<ze_fence_desc_t>(ZE_STRUCTURE_TYPE_FENCE_DESC);
  ze_fence_handle_t fence = nullptr;
  ASSERT_EQ(ze.zeFenceCreate(queue, &fence_desc, &fence), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandQueueExecuteCommandLists(queue, 1, &list, fence),
            ZE_RESULT_ERROR_INVALID_ARGUMENT) << "not closed";
  ASSERT_EQ(ze.zeCommandListClose(list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeFenceQueryStatus(fence), ZE_RESULT_NOT_READY);
  ASSERT_EQ(ze.zeCommandQueueExecuteCommandLists(queue, 1, &list, fence), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeFenceHostSynchronize(fence, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(back, source);
  // Again, after a reset of the fence and new source bytes.
  ASSERT_EQ(ze.zeFenceReset(fence), ZE_RESULT_SUCCESS);
  std::vector<unsigned char> next = Pattern(kSize, 10);
  std::copy(next.begin(), next.end(), source.begin());  // The list recorded source.data().
  ASSERT_EQ(ze.zeCommandQueueExecuteCommandLists(queue, 1, &list, fence), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandQueueSynchronize(queue, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeFenceQueryStatus(fence), ZE_RESULT_SUCCESS);
  EXPECT_EQ(back, source);
  // An immediate list, or one of another group, is not for this queue.
  ze_command_list_handle_t immediate = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, 1);
  EXPECT_EQ(ze.zeCommandQueueExecuteCommandLists(queue, 1, &immediate, nullptr),
            ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE);
  ze_command_list_desc_t compute_desc{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
  ze_command_list_handle_t compute = nullptr;
  ASSERT_EQ(ze.zeCommandListCreate(context, devices[0], &compute_desc, &compute),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListClose(compute), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandQueueExecuteCommandLists(queue, 1, &compute, nullptr),
            ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE);
  EXPECT_EQ(ze.zeCommandQueueDestroy(queue), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
      << "a live fence";
  EXPECT_EQ(ze.zeFenceDestroy(fence), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListReset(list), ZE_RESULT_SUCCESS);
  for (ze_command_list_handle_t l : {list, immediate, compute}) {
    EXPECT_EQ(ze.zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
  }
  EXPECT_EQ(ze.zeCommandQueueDestroy(queue), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Run with MEMD_FAKE_ZE_POISON=1 and MEMD_FAKE_ZE_COPY_LATENCY_US=300000: a
// reader who does not wait for the event sees 0xa5, then the right bytes.
TEST_F(Scenario, PoisonUntilComplete) {
  Start();
  void* device = NewDeviceMemory(kSize);
  ze_command_list_handle_t list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ze_event_pool_handle_t pool = NewEventPool(2);
  ze_event_handle_t uploaded = NewEvent(pool, 0);
  ze_event_handle_t downloaded = NewEvent(pool, 1);
  std::vector<unsigned char> source = Pattern(kSize, 5);
  std::vector<unsigned char> back(kSize, 0);
  auto start = Clock::now();
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, device, source.data(), kSize, uploaded, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, back.data(), device, kSize, downloaded, 1,
                                             &uploaded),
            ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventQueryStatus(uploaded), ZE_RESULT_NOT_READY);
  EXPECT_EQ(ze.zeEventHostSynchronize(downloaded, 0), ZE_RESULT_NOT_READY);
  EXPECT_EQ(ze.zeEventHostSynchronize(downloaded, 1000000), ZE_RESULT_NOT_READY);  // 1 ms.
  // The download starts after the upload's 300 ms and poisons `back` then.
  ASSERT_EQ(ze.zeEventHostSynchronize(uploaded, kForever), ZE_RESULT_SUCCESS);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  bool poisoned = false;
  for (int i = 0; i < 200 && !poisoned; ++i) {
    poisoned = back[0] == 0xa5 && back[kSize - 1] == 0xa5;
    if (!poisoned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(poisoned) << "the destination of a running copy reads 0xa5";
  EXPECT_EQ(ze.zeEventQueryStatus(downloaded), ZE_RESULT_NOT_READY);
  ASSERT_EQ(ze.zeEventHostSynchronize(downloaded, kForever), ZE_RESULT_SUCCESS);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(600));
  EXPECT_EQ(back, source);
  for (ze_event_handle_t event : {uploaded, downloaded}) {
    EXPECT_EQ(ze.zeEventDestroy(event), ZE_RESULT_SUCCESS);
  }
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Run with MEMD_FAKE_ZE_COPY_LATENCY_US=200000: a synchronous immediate list
// returns once the copy is done, an asynchronous one at once.
TEST_F(Scenario, SynchronousAndAsynchronousModes) {
  Start();
  void* device = NewDeviceMemory(4096);
  std::vector<unsigned char> source = Pattern(4096, 1);
  ze_event_pool_handle_t pool = NewEventPool(1);
  ze_event_handle_t done = NewEvent(pool, 0);
  ze_command_list_handle_t sync_list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
  auto start = Clock::now();
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(sync_list, device, source.data(), 4096, done, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(ze.zeEventQueryStatus(done), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeEventHostReset(done), ZE_RESULT_SUCCESS);
  ze_command_list_handle_t async_list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  start = Clock::now();
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(async_list, device, source.data(), 4096, done, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(150));
  EXPECT_EQ(ze.zeEventQueryStatus(done), ZE_RESULT_NOT_READY);
  EXPECT_EQ(ze.zeEventDestroy(done), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE) << "work names it";
  // Destroying the list finishes its work first.
  EXPECT_EQ(ze.zeCommandListDestroy(async_list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventQueryStatus(done), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventDestroy(done), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(sync_list), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Work waits for events the host signals; barriers, signal and reset commands.
TEST_F(Scenario, EventsOrderWork) {
  Start();
  ze_command_list_handle_t list = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ze_event_pool_handle_t pool = NewEventPool(3);
  ze_event_handle_t gate = NewEvent(pool, 0);
  ze_event_handle_t after = NewEvent(pool, 1);
  ze_event_handle_t flag = NewEvent(pool, 2);
  std::vector<unsigned char> source = Pattern(4096, 4);
  std::vector<unsigned char> target(4096, 0);
  ASSERT_EQ(ze.zeCommandListAppendWaitOnEvents(list, 1, &gate), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(list, target.data(), source.data(), 4096, nullptr, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendSignalEvent(list, flag), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendBarrier(list, after, 0, nullptr), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventHostSynchronize(after, 50 * 1000000), ZE_RESULT_NOT_READY);
  EXPECT_EQ(target, std::vector<unsigned char>(4096, 0)) << "nothing ran before the gate";
  ASSERT_EQ(ze.zeEventHostSignal(gate), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeEventHostSynchronize(after, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventQueryStatus(flag), ZE_RESULT_SUCCESS);
  EXPECT_EQ(target, source);
  ASSERT_EQ(ze.zeCommandListAppendEventReset(list, flag), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeEventHostReset(after), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeCommandListAppendBarrier(list, after, 0, nullptr), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeEventHostSynchronize(after, kForever), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeEventQueryStatus(flag), ZE_RESULT_NOT_READY);
  // One index, one live event; a pool with live events stays.
  auto again = Desc<ze_event_desc_t>(ZE_STRUCTURE_TYPE_EVENT_DESC);
  ze_event_handle_t duplicate = nullptr;
  EXPECT_EQ(ze.zeEventCreate(pool, &again, &duplicate), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  again.index = 3;
  EXPECT_EQ(ze.zeEventCreate(pool, &again, &duplicate), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
  for (ze_event_handle_t event : {gate, after, flag}) {
    EXPECT_EQ(ze.zeEventDestroy(event), ZE_RESULT_SUCCESS);
  }
  EXPECT_EQ(ze.zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeCommandListDestroy(list), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// Exits with work pending (a 5 s copy, a wait that never ends): unloading
// the fake must stop its threads, not wait for them. fake_ze_test times it.
TEST_F(Scenario, ExitWithPendingWork) {
  Start();
  void* device = NewDeviceMemory(4096);
  // Static: the copy may still read it while the process exits.
  static unsigned char source[4096] = {1};
  ze_command_list_handle_t copying = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ASSERT_EQ(ze.zeCommandListAppendMemoryCopy(copying, device, source, 4096, nullptr, 0,
                                             nullptr),
            ZE_RESULT_SUCCESS);
  ze_event_pool_handle_t pool = NewEventPool(1);
  ze_event_handle_t never = NewEvent(pool, 0);
  ze_command_list_handle_t waiting = NewImmediateList(ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS);
  ASSERT_EQ(ze.zeCommandListAppendWaitOnEvents(waiting, 1, &never), ZE_RESULT_SUCCESS);
  EXPECT_EQ(Counters().pending_commands, 2u);
  EXPECT_EQ(Counters().worker_threads, 2u);
}

}  // namespace
}  // namespace memd::fake_ze_test
