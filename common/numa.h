#pragma once

// Where memory sits on a machine with several NUMA nodes: which node a PCI
// device (a GPU) hangs off, and host memory placed on a node. Read from
// sysfs and done with mbind(2), without libnuma.

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd::numa {

// The nodes the kernel lists as <sysfs>/devices/system/node/nodeN; 0 when
// it lists none (a kernel without NUMA).
int NodeCount(const std::string& sysfs = "/sys");

// "0000:3b:00.0": a PCI address from its domain, bus and device numbers
// (function 0), as sysfs names devices.
std::string PciBusId(int domain, int bus, int device);

// The node of a PCI device, from <sysfs>/bus/pci/devices/<bus_id>/numa_node;
// nullopt when the kernel does not say (-1, no such device, unreadable).
std::optional<int> NodeOfPciDevice(std::string_view bus_id, const std::string& sysfs = "/sys");

// The node whose <sysfs>/devices/system/node/nodeN/cpulist ("0-3,8-11")
// lists `cpu`; nullopt when none does.
std::optional<int> NodeOfCpu(int cpu, const std::string& sysfs = "/sys");

// The CPU `pid` last ran on (field 39 of <proc>/PID/stat); nullopt when the
// process is gone or the file does not parse.
std::optional<int> LastCpuOf(pid_t pid, const std::string& proc = "/proc");

// Sets the memory policy of [address, address + bytes) to MPOL_PREFERRED
// `node`: pages faulted or allocated afterwards go there while it has room
// (another node rather than failing). On a MAP_SHARED mapping of a memfd or
// shmem it is the shared policy of the object itself, which fallocate and
// every other mapping of it follow. Errors: INVALID_ARGUMENT (a node past
// 1023), those of mbind (INVALID_ARGUMENT for a node the kernel lacks).
absl::Status PreferNode(void* address, std::uint64_t bytes, int node);

/// Anonymous memory whose pages are all on `node` where it has room
/// (MPOL_PREFERRED: on another node rather than fail), written once so that
/// they exist before anybody pins them. Owns the mapping (munmap). Movable.
class NodeMemory {
 public:
  // Errors: INVALID_ARGUMENT (0 bytes, a node past the kernel's), those of
  // mmap and mbind (RESOURCE_EXHAUSTED for ENOMEM).
  static absl::StatusOr<NodeMemory> Map(std::uint64_t bytes, int node);

  NodeMemory() = default;
  NodeMemory(NodeMemory&& other) noexcept;
  NodeMemory& operator=(NodeMemory&& other) noexcept;
  ~NodeMemory();

  std::span<std::byte> bytes() const { return bytes_; }

 private:
  NodeMemory(std::byte* data, std::uint64_t size) : bytes_(data, size) {}
  std::span<std::byte> bytes_;
};

// The node the page holding `address` is on now; nullopt when the kernel
// does not say (the page is not there, or no NUMA).
std::optional<int> NodeOfPage(const void* address);

// The one node the memory policy at `address` names (MPOL_PREFERRED or
// MPOL_BIND of one node), what get_mempolicy says of the mapping there;
// nullopt for the default policy or several nodes.
std::optional<int> PolicyNodeOf(const void* address);

}  // namespace memd::numa
