// memd FAKE Level Zero driver (a test double): the zeCommandListAppend*
// calls. Each builds its commands (waits first, then the operation, then the
// signal), checked and with pointers resolved at the call, and either records
// them in a regular list or submits them to an immediate list's engine.

#include <cstring>
#include <utility>

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {
namespace {

// The checks every append starts with, after the call's own null checks.
ze_result_t CheckList(State& state, ze_command_list_handle_t list) {
  if (!state.lists.Contains(list)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  // Appending to a closed list is an error until zeCommandListReset.
  if (list->closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

// An event the list may use: live and of the list's context.
ze_result_t CheckEvent(State& state, ze_command_list_handle_t list, ze_event_handle_t event) {
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.events.Contains(event) || event->pool->context != list->context) {
    return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
  }
  return ZE_RESULT_SUCCESS;
}

// `body` preceded by a wait on `waits` and followed by a signal of `signal`,
// recorded or submitted. Immediate lists in synchronous mode return once done.
ze_result_t Append(State& state, std::unique_lock<std::mutex>& lock, ze_command_list_handle_t list,
                   std::vector<Command> body, ze_event_handle_t signal, uint32_t num_waits,
                   ze_event_handle_t* waits) {
  if (waits == nullptr && num_waits > 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::vector<Command> commands;
  if (num_waits > 0) {
    Command wait;
    wait.kind = Command::Kind::kWait;
    for (uint32_t i = 0; i < num_waits; ++i) {
      if (ze_result_t result = CheckEvent(state, list, waits[i])) return result;
      wait.events.push_back(waits[i]);
    }
    commands.push_back(std::move(wait));
  }
  if (signal != nullptr && CheckEvent(state, list, signal) != ZE_RESULT_SUCCESS) {
    return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
  }
  for (Command& command : body) commands.push_back(std::move(command));
  if (signal != nullptr) {
    Command command;
    command.kind = Command::Kind::kSignal;
    command.events.push_back(signal);
    commands.push_back(std::move(command));
  }
  if (!list->immediate) {
    for (Command& command : commands) list->commands.push_back(std::move(command));
    return ZE_RESULT_SUCCESS;
  }
  Engine* engine = list->engine.get();
  uint64_t last = engine->Submit(std::move(commands));
  if (list->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS) {
    state.cv.wait(lock, [engine, last] { return engine->Completed(last); });
  }
  return ZE_RESULT_SUCCESS;
}

bool PowerOfTwo(size_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

ze_result_t CommandListAppendMemoryCopy(ze_command_list_handle_t hCommandList, void* dstptr,
                                        const void* srcptr, size_t size,
                                        ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                        ze_event_handle_t* phWaitEvents) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendMemoryCopy)) return result;
  if (hCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (dstptr == nullptr || srcptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  Command copy;
  copy.kind = Command::Kind::kCopy;
  copy.size = size;
  if (ze_result_t result = ResolveSpan(state, hCommandList->context, dstptr, size, &copy.dst)) {
    return result;
  }
  if (ze_result_t result = ResolveSpan(state, hCommandList->context, srcptr, size, &copy.src)) {
    return result;
  }
  std::vector<Command> body;
  body.push_back(std::move(copy));
  return Append(state, lock, hCommandList, std::move(body), hSignalEvent, numWaitEvents,
                phWaitEvents);
}

ze_result_t CommandListAppendMemoryFill(ze_command_list_handle_t hCommandList, void* ptr,
                                        const void* pattern, size_t pattern_size, size_t size,
                                        ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                        ze_event_handle_t* phWaitEvents) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendMemoryFill)) return result;
  if (hCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (ptr == nullptr || pattern == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  // A power of two no larger than the queue group's maxMemoryFillPatternSize.
  if (!PowerOfTwo(pattern_size) ||
      pattern_size > kQueueGroups[hCommandList->ordinal].max_fill_pattern_size) {
    return ZE_RESULT_ERROR_INVALID_SIZE;
  }
  Command fill;
  fill.kind = Command::Kind::kFill;
  fill.size = size;
  fill.pattern_size = pattern_size;
  std::memcpy(fill.pattern.data(), pattern, pattern_size);
  if (ze_result_t result = ResolveSpan(state, hCommandList->context, ptr, size, &fill.dst)) {
    return result;
  }
  std::vector<Command> body;
  body.push_back(std::move(fill));
  return Append(state, lock, hCommandList, std::move(body), hSignalEvent, numWaitEvents,
                phWaitEvents);
}

ze_result_t CommandListAppendBarrier(ze_command_list_handle_t hCommandList,
                                     ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                     ze_event_handle_t* phWaitEvents) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendBarrier)) return result;
  if (hCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  // Engines run in order, so a barrier is its waits and its signal.
  return Append(state, lock, hCommandList, {}, hSignalEvent, numWaitEvents, phWaitEvents);
}

ze_result_t CommandListAppendSignalEvent(ze_command_list_handle_t hCommandList,
                                         ze_event_handle_t hEvent) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendSignalEvent)) return result;
  if (hCommandList == nullptr || hEvent == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  return Append(state, lock, hCommandList, {}, hEvent, 0, nullptr);
}

ze_result_t CommandListAppendWaitOnEvents(ze_command_list_handle_t hCommandList,
                                          uint32_t numEvents, ze_event_handle_t* phEvents) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendWaitOnEvents)) return result;
  if (hCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (phEvents == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  return Append(state, lock, hCommandList, {}, nullptr, numEvents, phEvents);
}

ze_result_t CommandListAppendEventReset(ze_command_list_handle_t hCommandList,
                                        ze_event_handle_t hEvent) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kCommandListAppendEventReset)) return result;
  if (hCommandList == nullptr || hEvent == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (ze_result_t result = CheckList(state, hCommandList)) return result;
  if (ze_result_t result = CheckEvent(state, hCommandList, hEvent)) return result;
  Command reset;
  reset.kind = Command::Kind::kReset;
  reset.events.push_back(hEvent);
  std::vector<Command> body;
  body.push_back(std::move(reset));
  return Append(state, lock, hCommandList, std::move(body), nullptr, 0, nullptr);
}

}  // namespace memd::fake_ze
