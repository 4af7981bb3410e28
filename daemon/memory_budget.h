#pragma once

#include <cstdint>
#include <string>

namespace memd {

// How much memory this process may use, for the default pool limits: the
// machine's physical memory, capped by the memory limit of its cgroup and
// of every cgroup above it (a container's or a systemd unit's MemoryMax=),
// since pool memory (memfds) is charged to memd's cgroup and a default that
// ignored the cap would get memd OOM-killed in a pod.
struct MemoryBudget {
  std::uint64_t bytes = 0;
  // What set it, for the log: "physical memory", or the limit file.
  std::string source;
};

// Where to look; tests point these at a fake tree.
struct MemoryBudgetSources {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::uint64_t physical_bytes = 0;  // 0: sysconf(_SC_PHYS_PAGES) x page size.
};

// Reads cgroup v2 memory.max (unified hierarchy) or, on a v1 host, the
// memory controller's memory.limit_in_bytes. Files it cannot read are
// skipped: with none, the budget is the physical memory. Thread-safe.
MemoryBudget AvailableMemory(const MemoryBudgetSources& sources = {});

}  // namespace memd
