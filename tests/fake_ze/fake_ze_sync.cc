// memd FAKE Level Zero driver (a test double): event pools, events and fences,
// the host's view of when appended work completed. Signalled by the engines
// (fake_ze_engine.cc) or the host; every wait is on State::cv.

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {
namespace {

ze_result_t EnterEvent(State& state, Api api, ze_event_handle_t event) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (event == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.events.Contains(event)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

ze_result_t EnterFence(State& state, Api api, ze_fence_handle_t fence) {
  if (ze_result_t result = state.Enter(api)) return result;
  if (fence == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.fences.Contains(fence)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  return ZE_RESULT_SUCCESS;
}

constexpr ze_event_pool_flags_t kEventPoolFlags =
    ZE_EVENT_POOL_FLAG_HOST_VISIBLE | ZE_EVENT_POOL_FLAG_IPC | ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP;
constexpr ze_event_scope_flags_t kScopeFlags =
    ZE_EVENT_SCOPE_FLAG_SUBDEVICE | ZE_EVENT_SCOPE_FLAG_DEVICE | ZE_EVENT_SCOPE_FLAG_HOST;

}  // namespace

ze_result_t EventPoolCreate(ze_context_handle_t hContext, const ze_event_pool_desc_t* desc,
                            uint32_t numDevices, ze_device_handle_t* phDevices,
                            ze_event_pool_handle_t* phEventPool) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kEventPoolCreate)) return result;
  if (hContext == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || phEventPool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if ((desc->flags & ~kEventPoolFlags) != 0) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (desc->count == 0 || (phDevices == nullptr && numDevices > 0)) {
    return ZE_RESULT_ERROR_INVALID_SIZE;
  }
  if (!state.contexts.Contains(hContext)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < numDevices; ++i) {
    if (phDevices[i] == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (state.Device(phDevices[i]) == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  auto pool = std::make_unique<_ze_event_pool_handle_t>();
  pool->context = hContext;
  pool->flags = desc->flags;
  pool->taken.assign(desc->count, false);
  *phEventPool = state.event_pools.Add(std::move(pool));
  return ZE_RESULT_SUCCESS;
}

ze_result_t EventPoolDestroy(ze_event_pool_handle_t hEventPool) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kEventPoolDestroy)) return result;
  if (hEventPool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (!state.event_pools.Contains(hEventPool)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  for (bool taken : hEventPool->taken) {
    if (taken) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  }
  state.event_pools.Remove(hEventPool);
  return ZE_RESULT_SUCCESS;
}

ze_result_t EventCreate(ze_event_pool_handle_t hEventPool, const ze_event_desc_t* desc,
                        ze_event_handle_t* phEvent) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kEventCreate)) return result;
  if (hEventPool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || phEvent == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if ((desc->signal & ~kScopeFlags) != 0 || (desc->wait & ~kScopeFlags) != 0) {
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  }
  if (!state.event_pools.Contains(hEventPool)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  // An index beyond the pool, or one a live event already has.
  if (desc->index >= hEventPool->taken.size() || hEventPool->taken[desc->index]) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  hEventPool->taken[desc->index] = true;
  auto event = std::make_unique<_ze_event_handle_t>();
  event->pool = hEventPool;
  event->index = desc->index;
  *phEvent = state.events.Add(std::move(event));
  return ZE_RESULT_SUCCESS;
}

ze_result_t EventDestroy(ze_event_handle_t hEvent) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterEvent(state, Api::kEventDestroy, hEvent)) return result;
  // Submitted work still names it: destroying it now would be a use after free.
  if (hEvent->pending > 0) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  hEvent->pool->taken[hEvent->index] = false;
  state.events.Remove(hEvent);
  return ZE_RESULT_SUCCESS;
}

ze_result_t EventHostSignal(ze_event_handle_t hEvent) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterEvent(state, Api::kEventHostSignal, hEvent)) return result;
  hEvent->signalled = true;
  state.cv.notify_all();
  return ZE_RESULT_SUCCESS;
}

ze_result_t EventHostSynchronize(ze_event_handle_t hEvent, uint64_t timeout) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterEvent(state, Api::kEventHostSynchronize, hEvent)) return result;
  // The event may not be destroyed while this waits: it is the caller's.
  return WaitFor(state, lock, timeout, [hEvent] { return hEvent->signalled; });
}

ze_result_t EventQueryStatus(ze_event_handle_t hEvent) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterEvent(state, Api::kEventQueryStatus, hEvent)) return result;
  return hEvent->signalled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

ze_result_t EventHostReset(ze_event_handle_t hEvent) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterEvent(state, Api::kEventHostReset, hEvent)) return result;
  hEvent->signalled = false;
  return ZE_RESULT_SUCCESS;
}

ze_result_t FenceCreate(ze_command_queue_handle_t hCommandQueue, const ze_fence_desc_t* desc,
                        ze_fence_handle_t* phFence) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = state.Enter(Api::kFenceCreate)) return result;
  if (hCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (desc == nullptr || phFence == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (desc->flags > ZE_FENCE_FLAG_SIGNALED) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (!state.queues.Contains(hCommandQueue)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  auto fence = std::make_unique<_ze_fence_handle_t>();
  fence->queue = hCommandQueue;
  fence->signalled = (desc->flags & ZE_FENCE_FLAG_SIGNALED) != 0;
  *phFence = state.fences.Add(std::move(fence));
  return ZE_RESULT_SUCCESS;
}

ze_result_t FenceDestroy(ze_fence_handle_t hFence) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterFence(state, Api::kFenceDestroy, hFence)) return result;
  if (hFence->pending > 0) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
  state.fences.Remove(hFence);
  return ZE_RESULT_SUCCESS;
}

ze_result_t FenceHostSynchronize(ze_fence_handle_t hFence, uint64_t timeout) {
  State& state = GetState();
  std::unique_lock<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterFence(state, Api::kFenceHostSynchronize, hFence)) return result;
  return WaitFor(state, lock, timeout, [hFence] { return hFence->signalled; });
}

ze_result_t FenceQueryStatus(ze_fence_handle_t hFence) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterFence(state, Api::kFenceQueryStatus, hFence)) return result;
  return hFence->signalled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

ze_result_t FenceReset(ze_fence_handle_t hFence) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  if (ze_result_t result = EnterFence(state, Api::kFenceReset, hFence)) return result;
  hFence->signalled = false;
  return ZE_RESULT_SUCCESS;
}

}  // namespace memd::fake_ze
