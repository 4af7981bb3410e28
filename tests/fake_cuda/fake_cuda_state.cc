// memd FAKE CUDA driver (a test double): the one FakeDriver of this load of
// the library, what unloading it gives back, and fault injection by call
// count.

#include "tests/fake_cuda/fake_cuda_state.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string_view>

#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {

FakeDriver g_driver;

// The library is being unloaded (dlclose, or exit): stop the engines, drop
// the work they still had (a hung copy included), give everything back.
FakeDriver::~FakeDriver() {
  StopThreads();
  busy_.clear();
  streams_.clear();
  events_.clear();
  for (auto& [base, host] : host_) {
    if (host.allocated) munmap(AsPointer(base), host.mapped);
  }
  for (auto& [base, allocation] : legacy_) {
    munmap(AsPointer(base), allocation.size);
    close(allocation.fd);
  }
  for (auto& [base, mapping] : ipc_) munmap(AsPointer(base), mapping.size);
  for (auto& [base, reservation] : reservations_) munmap(AsPointer(base), reservation);
  for (auto& [handle, allocation] : allocations_) close(allocation.fd);
  for (const VmmAllocation& allocation : released_) close(allocation.fd);
}

// ---- Fault injection by call count (MEMD_FAKE_CUDA_FAULTS "symbol@N=CODE") ----

// The error the current call of `symbol` must return, or CUDA_SUCCESS.
// Counts every call from the first successful cuInit on.
CUresult FakeDriver::Injected(const char* symbol) {
  {
    std::lock_guard<std::mutex> lock(count_mu_);
    auto counted = call_counts_.find(std::string_view(symbol));
    if (counted == call_counts_.end()) counted = call_counts_.emplace(symbol, 0).first;
    ++counted->second;
  }
  if (!call_faults_armed_.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(fault_mu_);
  auto it = call_faults_.find(symbol);
  if (it == call_faults_.end()) return CUDA_SUCCESS;
  const uint64_t call = ++it->second.calls;
  for (const CallFault& fault : it->second.faults) {
    if (fault.call == call) return fault.code;
  }
  return CUDA_SUCCESS;
}

uint64_t FakeDriver::CallCount(const char* symbol) {
  std::lock_guard<std::mutex> lock(count_mu_);
  auto counted = call_counts_.find(std::string_view(symbol));
  return counted == call_counts_.end() ? 0 : counted->second;
}

}  // namespace memd::fake_cuda
