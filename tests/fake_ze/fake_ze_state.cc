// memd FAKE Level Zero driver (a test double): the State every entry point
// shares, its lookups, and the counters test hook.

#include "tests/fake_ze/fake_ze_state.h"

#include <cstring>
#include <string_view>

#include "tests/fake_ze/fake_ze_hooks.h"

namespace memd::fake_ze {
namespace {

constexpr const char* kApiNames[] = {
#define MEMD_FAKE_ZE_NAME(name) "ze" #name,
    MEMD_FAKE_ZE_FUNCTIONS(MEMD_FAKE_ZE_NAME)
#undef MEMD_FAKE_ZE_NAME
};
static_assert(sizeof(kApiNames) / sizeof(kApiNames[0]) == kApiCount);

}  // namespace

const char* ApiName(Api api) { return kApiNames[static_cast<int>(api)]; }

bool FindApi(std::string_view name, Api* api) {
  for (int i = 0; i < kApiCount; ++i) {
    if (name == kApiNames[i]) {
      *api = static_cast<Api>(i);
      return true;
    }
  }
  return false;
}

State& GetState() {
  // Destroyed when the library is unloaded (dlclose, or exit), which is what
  // stops the engine threads.
  static State state;
  return state;
}

State::~State() {
  std::unique_lock<std::mutex> lock(mu);
  std::vector<std::unique_ptr<Engine>> engines;
  for (const auto& [handle, list] : lists) {
    if (list->engine) engines.push_back(std::move(list->engine));
  }
  for (const auto& [handle, queue] : queues) engines.push_back(std::move(queue->engine));
  for (auto& engine : engines) engine->RequestStop();
  lock.unlock();
  engines.clear();  // Joins, without the mutex the threads need to see the stop.
}

ze_result_t State::Enter(Api api) {
  if (!Initialized()) return ZE_RESULT_ERROR_UNINITIALIZED;
  uint64_t call = ++calls[static_cast<int>(api)];
  for (const Fault& fault : config.faults) {
    if (fault.api == api && fault.call == call) return fault.code;
  }
  return ZE_RESULT_SUCCESS;
}

ze_device_handle_t State::Device(ze_device_handle_t handle) {
  for (int i = 0; i < config.devices; ++i) {
    if (handle == &devices[static_cast<size_t>(i)]) return handle;
  }
  return nullptr;
}

Allocation* State::FindMemory(uintptr_t address, size_t size, bool* straddles) {
  *straddles = false;
  auto next = memory.upper_bound(address);  // First allocation starting above.
  uintptr_t end = address + size;
  if (next != memory.end() && end > next->first) *straddles = true;
  if (next == memory.begin()) return nullptr;
  Allocation* allocation = std::prev(next)->second.get();
  uintptr_t allocation_end = allocation->base + allocation->size;
  if (address >= allocation_end) return nullptr;
  if (end > allocation_end) {
    *straddles = true;
    return nullptr;
  }
  return *straddles ? nullptr : allocation;
}

bool State::ContextInUse(ze_context_handle_t context) const {
  for (const auto& [base, allocation] : memory) {
    if (allocation->context == context) return true;
  }
  for (const auto& [handle, pool] : event_pools) {
    if (pool->context == context) return true;
  }
  for (const auto& [handle, queue] : queues) {
    if (queue->context == context) return true;
  }
  for (const auto& [handle, list] : lists) {
    if (list->context == context) return true;
  }
  return false;
}

std::unique_ptr<Engine> NewEngine(State& state) {
  return std::make_unique<Engine>(state.mu, state.cv,
                                  std::chrono::microseconds(state.config.copy_latency_us),
                                  state.config.poison);
}

namespace {

void CountMemory(const State& state, struct memd_fake_ze_counters* out) {
  for (const auto& [base, allocation] : state.memory) {
    switch (allocation->kind) {
      case MemoryKind::kDevice:
        ++out->device_allocations;
        out->device_bytes[allocation->device->index] += allocation->size;
        out->device_bytes_total += allocation->size;
        if (allocation->cached_fd >= 0) ++out->cached_fds;
        break;
      case MemoryKind::kHost:
        ++out->host_allocations;
        break;
      case MemoryKind::kIpc:
        ++out->ipc_opened;
        break;
    }
  }
}

void CountEngines(const State& state, struct memd_fake_ze_counters* out) {
  for (const auto& [handle, list] : state.lists) {
    if (!list->engine) continue;
    ++out->worker_threads;
    out->pending_commands += list->engine->Pending();
  }
  for (const auto& [handle, queue] : state.queues) {
    ++out->worker_threads;
    out->pending_commands += queue->engine->Pending();
  }
}

}  // namespace
}  // namespace memd::fake_ze

extern "C" __attribute__((visibility("default"))) int memd_fake_ze_counters(
    struct memd_fake_ze_counters* out) {
  using namespace memd::fake_ze;
  if (out == nullptr) return -1;
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  std::memset(out, 0, sizeof(*out));
  out->contexts = state.contexts.size();
  CountMemory(state, out);
  out->event_pools = state.event_pools.size();
  out->events = state.events.size();
  out->command_lists = state.lists.size();
  out->command_queues = state.queues.size();
  out->fences = state.fences.size();
  CountEngines(state, out);
  out->ipc_get_calls = state.ipc_get_calls;
  out->ipc_open_calls = state.ipc_open_calls;
  out->ipc_close_calls = state.ipc_close_calls;
  out->cached_fd_misuse = state.cached_fd_misuse;
  return 0;
}
