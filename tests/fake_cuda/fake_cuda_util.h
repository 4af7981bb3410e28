#pragma once

// memd FAKE CUDA driver (a test double): helpers the API areas share. Pages
// and address ranges, maps keyed by start address, memfds, a physical
// device's UUID. No driver state.

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace memd::fake_cuda {

size_t PageSize();

// Rounds `value` up to a multiple of `to` (a power of two); false on overflow.
inline bool RoundUp(size_t value, size_t to, size_t* rounded) {
  if (value > SIZE_MAX - (to - 1)) return false;
  *rounded = (value + to - 1) & ~(to - 1);
  return true;
}

inline bool EndOf(uintptr_t start, size_t size, uintptr_t* end) {
  if (start > UINTPTR_MAX - size) return false;
  *end = start + size;
  return true;
}

inline void* AsPointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

// A physical device's UUID: "memd-fake-gpu" then the index in 3 big-endian
// bytes. Stable across processes, whatever ordinal a process gives the device.
CUuuid PhysicalUuid(int physical);

// Where /proc/self/fd/<fd> points ("/memfd:NAME (deleted)" for a memfd).
std::string FdTarget(int fd);

// A sealed memfd of `size` bytes with its pages allocated now (fallocate), so
// that running out of memory is an error here and not a SIGBUS later.
CUresult CreateMemfd(const std::string& name, size_t size, int* fd_out);

// The entry in an address-keyed map whose range contains `address`.
template <typename Map>
typename Map::iterator Containing(Map& map, uintptr_t address) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < it->second.size ? it : map.end();
}

// True when [start, end) overlaps an entry of an address-keyed map.
template <typename Map>
bool Overlaps(const Map& map, uintptr_t start, uintptr_t end) {
  auto it = map.lower_bound(end);  // First entry starting at or after `end`.
  if (it == map.begin()) return false;
  --it;
  return it->first + it->second.size > start;
}

}  // namespace memd::fake_cuda
