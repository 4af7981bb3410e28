#pragma once

// memd FAKE Level Zero driver (a test double): the driver's objects, which the
// opaque ze_*_handle_t types of ze_api.h point to, and the one State that owns
// them all for this load of the library.

#include <level_zero/ze_api.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tests/fake_ze/fake_ze_api.h"
#include "tests/fake_ze/fake_ze_config.h"
#include "tests/fake_ze/fake_ze_engine.h"

// The handle types. The driver hands out pointers to these; the loader, in
// intercept mode, wraps them in its own objects and unwraps them on the way in.
struct _ze_driver_handle_t {};

struct _ze_device_handle_t {
  int index = 0;
  uint64_t used = 0;  // Requested bytes of live zeMemAllocDevice allocations.
};

struct _ze_context_handle_t {};

struct _ze_event_pool_handle_t {
  ze_context_handle_t context = nullptr;
  ze_event_pool_flags_t flags = 0;
  std::vector<bool> taken;  // Per index: an event of that index is alive.
};

struct _ze_event_handle_t {
  ze_event_pool_handle_t pool = nullptr;
  uint32_t index = 0;
  bool signalled = false;
  int pending = 0;  // Submitted commands that name it (Engine::Submit).
};

struct _ze_command_queue_handle_t {
  ze_context_handle_t context = nullptr;
  ze_device_handle_t device = nullptr;
  uint32_t ordinal = 0;
  ze_command_queue_mode_t mode = ZE_COMMAND_QUEUE_MODE_DEFAULT;
  std::unique_ptr<memd::fake_ze::Engine> engine;
};

struct _ze_fence_handle_t {
  ze_command_queue_handle_t queue = nullptr;
  bool signalled = false;
  int pending = 0;
};

struct _ze_command_list_handle_t {
  ze_context_handle_t context = nullptr;
  ze_device_handle_t device = nullptr;
  uint32_t ordinal = 0;  // Command queue group.
  bool immediate = false;
  // Regular lists: recorded until executed.
  bool closed = false;
  std::vector<memd::fake_ze::Command> commands;
  // Immediate lists: run at once, on their own engine.
  ze_command_queue_mode_t mode = ZE_COMMAND_QUEUE_MODE_DEFAULT;
  std::unique_ptr<memd::fake_ze::Engine> engine;
};

namespace memd::fake_ze {

// Command queue groups every device reports: 0 compute and copy, 1 copy only.
struct QueueGroup {
  ze_command_queue_group_property_flags_t flags;
  size_t max_fill_pattern_size;
  uint32_t queues;
};
constexpr QueueGroup kQueueGroups[] = {
    {ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE | ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY,
     16, 1},
    {ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY, 4, 2},
};
constexpr uint32_t kQueueGroupCount = 2;

enum class MemoryKind { kDevice, kHost, kIpc };

// One zeMemAllocDevice / zeMemAllocHost allocation or zeMemOpenIpcHandle range.
struct Allocation {
  MemoryKind kind = MemoryKind::kHost;
  ze_context_handle_t context = nullptr;
  ze_device_handle_t device = nullptr;  // nullptr for host allocations.
  uintptr_t base = 0;                   // What the caller got.
  size_t size = 0;                      // Requested; for IPC the mapped size.
  uint64_t id = 0;
  std::shared_ptr<Mapping> mapping;
  // IPC cache on: the exported fd the driver hands out every time, and the
  // file it must still be when zeMemFree closes it.
  int cached_fd = -1;
  dev_t cached_dev = 0;
  ino_t cached_ino = 0;
};

// Owns the driver's objects of one handle type, keyed by handle.
template <typename T>
class Registry {
 public:
  T* Add(std::unique_ptr<T> object) {
    T* handle = object.get();
    objects_[handle] = std::move(object);
    return handle;
  }
  bool Contains(const T* handle) const { return objects_.count(handle) != 0; }
  std::unique_ptr<T> Remove(const T* handle) {
    auto it = objects_.find(handle);
    std::unique_ptr<T> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }
  size_t size() const { return objects_.size(); }
  auto begin() const { return objects_.begin(); }
  auto end() const { return objects_.end(); }

 private:
  std::map<const T*, std::unique_ptr<T>> objects_;
};

// Everything the driver knows, for one load of the library. One mutex guards
// all of it; `cv` is notified whenever an event or fence is signalled, a
// command completes or the engines stop. The destructor (at dlclose or
// process exit) stops and joins every engine thread before anything else goes.
class State {
 public:
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();

  std::mutex mu;
  std::condition_variable cv;

  // The start of every call but zeInit: ZE_RESULT_ERROR_UNINITIALIZED before
  // a successful zeInit, else counts the call and returns the fault
  // MEMD_FAKE_ZE_FAULTS plans for it, or ZE_RESULT_SUCCESS.
  ze_result_t Enter(Api api);
  bool Initialized() const { return init_tried && init_result == ZE_RESULT_SUCCESS; }

  // Lookups; nullptr or false when the handle is not a live one of the fake.
  ze_device_handle_t Device(ze_device_handle_t handle);
  bool IsDriver(ze_driver_handle_t handle) const { return handle == &driver; }
  // The allocation or IPC range containing [address, address + size) whole,
  // else nullptr; *straddles says whether the range touches one only partly.
  Allocation* FindMemory(uintptr_t address, size_t size, bool* straddles);
  bool ContextInUse(ze_context_handle_t context) const;

  // Guarded by mu.
  bool init_tried = false;
  ze_result_t init_result = ZE_RESULT_ERROR_UNINITIALIZED;
  Config config;
  std::array<uint64_t, kApiCount> calls{};
  _ze_driver_handle_t driver;
  std::array<_ze_device_handle_t, kMaxDevices> devices;
  Registry<_ze_context_handle_t> contexts;
  Registry<_ze_event_pool_handle_t> event_pools;
  Registry<_ze_event_handle_t> events;
  Registry<_ze_fence_handle_t> fences;
  Registry<_ze_command_queue_handle_t> queues;
  Registry<_ze_command_list_handle_t> lists;
  std::map<uintptr_t, std::unique_ptr<Allocation>> memory;  // By base address.
  uint64_t next_allocation_id = 1;
  uint64_t ipc_get_calls = 0;
  uint64_t ipc_open_calls = 0;
  uint64_t ipc_close_calls = 0;
  uint64_t cached_fd_misuse = 0;
};

// The one State of this load of the library.
State& GetState();

// An engine configured as MEMD_FAKE_ZE_COPY_LATENCY_US / _POISON say.
std::unique_ptr<Engine> NewEngine(State& state);

// Waits on state.cv (lock held) until `done()` or `timeout_ns` passed
// (UINT64_MAX: forever; 0: just looks). ZE_RESULT_SUCCESS or
// ZE_RESULT_NOT_READY.
template <typename Done>
ze_result_t WaitFor(State& state, std::unique_lock<std::mutex>& lock, uint64_t timeout_ns,
                    Done done) {
  if (done()) return ZE_RESULT_SUCCESS;
  if (timeout_ns == 0) return ZE_RESULT_NOT_READY;
  // Beyond ~146 years the deadline would overflow: that is forever too.
  if (timeout_ns >= (uint64_t{1} << 62)) {
    state.cv.wait(lock, done);
    return ZE_RESULT_SUCCESS;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
  return state.cv.wait_until(lock, deadline, done) ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}

// Where a command on a list of `context` may read or write [ptr, ptr + size)
// (fake_ze_memory.cc): a fake device allocation of that context or an
// IPC-opened range (translated to the fake's own mapping), a fake host
// allocation, or plain host memory. ZE_RESULT_ERROR_INVALID_ARGUMENT if the
// range runs out of the allocation it starts in or touches another context's
// device memory.
ze_result_t ResolveSpan(State& state, ze_context_handle_t context, const void* ptr, size_t size,
                        Span* span);

}  // namespace memd::fake_ze
