// memd FAKE Level Zero driver (a test double): command queues and command
// lists, regular and immediate, and the commands appended to them. A regular
// list records commands until a queue executes it; an immediate list submits
// each append to its own engine at once. Either way the work completes later,
// on the engine's thread (fake_ze_engine.cc).

#include <utility>

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {
namespace {

// The checks a queue or immediate list descriptor must pass.
ze_result_t CheckQueueDesc(const ze_command_queue_desc_t& desc) {
  if (desc.flags > ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY ||
      desc.mode > ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS ||
      desc.priority > ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_HIGH) {
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  }
  if (desc.ordinal >= kQueueGroupCount || desc.index >= kQueueGroups[desc.ordinal].queues) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  return ZE_RESULT_SUCCESS;
}

// Context and device checks shared by the create calls.
ze_result_t CheckContextAndDevice(State& state, ze_context_handle_t context,
                                  ze_device_handle_t device) {
  if (context == nullptr || device == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.contexts.Contains(context) || state.Device(device) == nullptr) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  return ZE_RESULT_SUCCESS;
}

bool Synchronous(ze_command_queue_mode_t mode) { return mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS; }

}  // namespace

ze_result_t CommandQueueCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                               const ze_command_queue_desc_t* desc,
                               ze_command_queue_handle_t* phCommandQueue) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandQueueCreate)) return result;
  if (ze_result_t result = CheckContextAndDevice(state, hContext, hDevice)) return result;
  if (desc == nullptr || phCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ze_result_t result = CheckQueueDesc(*desc)) return result;
  auto queue = std::make_unique<_ze_command_queue_handle_t>();
  queue->context = hContext;
  queue->device = hDevice;
  queue->ordinal = desc->ordinal;
  queue->mode = desc->mode;
  queue->engine = NewEngine(state);
  *phCommandQueue = state.queues.Add(std::move(queue));
  return ZE_RESULT_SUCCESS;
}

ze_result_t CommandQueueDestroy(ze_command_queue_handle_t hCommandQueue) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandQueueDestroy)) return result;
  if (hCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.queues.Contains(hCommandQueue)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (const auto& [handle, fence] : state.fences) {
    if (fence->queue == hCommandQueue) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  }
  // As Intel's driver does, finish the submitted work first.
  state.cv.wait(lock, [hCommandQueue] { return hCommandQueue->engine->Idle(); });
  std::unique_ptr<_ze_command_queue_handle_t> queue = state.queues.Remove(hCommandQueue);
  lock.unlock();
  queue.reset();  // Joins the engine thread, which needs the mutex to stop.
  return ZE_RESULT_SUCCESS;
}

namespace {

// Checks one list of a zeCommandQueueExecuteCommandLists call.
ze_result_t CheckExecutable(State& state, ze_command_queue_handle_t queue,
                            ze_command_list_handle_t list) {
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.lists.Contains(list)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (list->immediate || list->ordinal != queue->ordinal) {
    return ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE;
  }
  if (list->context != queue->context || list->device != queue->device || !list->closed) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  // Events recorded in the list must still exist (the list keeps no reference).
  for (const Command& command : list->commands) {
    for (ze_event_handle_t event : command.events) {
      if (!state.events.Contains(event)) return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
    }
  }
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t CommandQueueExecuteCommandLists(ze_command_queue_handle_t hCommandQueue,
                                            uint32_t numCommandLists,
                                            ze_command_list_handle_t* phCommandLists,
                                            ze_fence_handle_t hFence) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandQueueExecuteCommandLists)) return result;
  if (hCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (phCommandLists == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (numCommandLists == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  if (!state.queues.Contains(hCommandQueue)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < numCommandLists; ++i) {
    if (ze_result_t result = CheckExecutable(state, hCommandQueue, phCommandLists[i])) {
      return result;
    }
  }
  if (hFence != nullptr && (!state.fences.Contains(hFence) || hFence->queue != hCommandQueue)) {
    return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
  }
  std::vector<Command> work;
  for (uint32_t i = 0; i < numCommandLists; ++i) {
    const std::vector<Command>& commands = phCommandLists[i]->commands;
    work.insert(work.end(), commands.begin(), commands.end());
  }
  if (hFence != nullptr) {
    Command signal;
    signal.kind = Command::Kind::kSignalFence;
    signal.fence = hFence;
    work.push_back(std::move(signal));
  }
  Engine* engine = hCommandQueue->engine.get();
  uint64_t last = engine->Submit(std::move(work));
  if (Synchronous(hCommandQueue->mode)) {
    state.cv.wait(lock, [engine, last] { return engine->Completed(last); });
  }
  return ZE_RESULT_SUCCESS;
}

ze_result_t CommandQueueSynchronize(ze_command_queue_handle_t hCommandQueue, uint64_t timeout) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandQueueSynchronize)) return result;
  if (hCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.queues.Contains(hCommandQueue)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  Engine* engine = hCommandQueue->engine.get();
  uint64_t last = engine->Submit({});  // What is submitted now, not what comes later.
  return WaitFor(state, lock, timeout, [engine, last] { return engine->Completed(last); });
}

ze_result_t CommandListCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                              const ze_command_list_desc_t* desc,
                              ze_command_list_handle_t* phCommandList) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListCreate)) return result;
  if (ze_result_t result = CheckContextAndDevice(state, hContext, hDevice)) return result;
  if (desc == nullptr || phCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->flags > 0x7) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (desc->commandQueueGroupOrdinal >= kQueueGroupCount) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  auto list = std::make_unique<_ze_command_list_handle_t>();
  list->context = hContext;
  list->device = hDevice;
  list->ordinal = desc->commandQueueGroupOrdinal;
  *phCommandList = state.lists.Add(std::move(list));
  return ZE_RESULT_SUCCESS;
}

ze_result_t CommandListCreateImmediate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                       const ze_command_queue_desc_t* altdesc,
                                       ze_command_list_handle_t* phCommandList) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListCreateImmediate)) return result;
  if (ze_result_t result = CheckContextAndDevice(state, hContext, hDevice)) return result;
  if (altdesc == nullptr || phCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ze_result_t result = CheckQueueDesc(*altdesc)) return result;
  auto list = std::make_unique<_ze_command_list_handle_t>();
  list->context = hContext;
  list->device = hDevice;
  list->ordinal = altdesc->ordinal;
  list->immediate = true;
  list->mode = altdesc->mode;
  list->engine = NewEngine(state);
  *phCommandList = state.lists.Add(std::move(list));
  return ZE_RESULT_SUCCESS;
}

namespace {

ze_result_t EnterList(State& state, Api api, ze_command_list_handle_t list) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (list == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.lists.Contains(list)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t CommandListDestroy(ze_command_list_handle_t hCommandList) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterList(state, Api::kCommandListDestroy, hCommandList)) {
    return result;
  }
  if (hCommandList->immediate) {
    // As Intel's driver does, finish the appended work first.
    state.cv.wait(lock, [hCommandList] { return hCommandList->engine->Idle(); });
  }
  std::unique_ptr<_ze_command_list_handle_t> list = state.lists.Remove(hCommandList);
  lock.unlock();
  list.reset();  // Joins an immediate list's engine thread.
  return ZE_RESULT_SUCCESS;
}

ze_result_t CommandListClose(ze_command_list_handle_t hCommandList) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterList(state, Api::kCommandListClose, hCommandList)) return result;
  hCommandList->closed = !hCommandList->immediate;  // Nothing to close on an immediate list.
  return ZE_RESULT_SUCCESS;
}

ze_result_t CommandListReset(ze_command_list_handle_t hCommandList) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterList(state, Api::kCommandListReset, hCommandList)) return result;
  // Queues copied what they execute, so a regular list may be reset at once.
  hCommandList->commands.clear();
  hCommandList->closed = false;
  return ZE_RESULT_SUCCESS;
}

}  // namespace memd::fake_ze
