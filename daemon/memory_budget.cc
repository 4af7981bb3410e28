#include "daemon/memory_budget.h"

#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memd {
namespace {

std::uint64_t PhysicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page : 0;
}

// A limit file's number; nullopt for "max" (no limit) or anything unreadable.
std::optional<std::uint64_t> ReadLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return std::nullopt;
  std::uint64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes)) return std::nullopt;
  return bytes;
}

// The cgroup path of this process in the hierarchy that limits memory, and
// the directory and file name of that hierarchy's limits.
struct Hierarchy {
  std::string path;
  std::string root;
  std::string limit_file;
};

std::optional<Hierarchy> FindHierarchy(const MemoryBudgetSources& sources) {
  std::ifstream in(sources.proc_self_cgroup);
  std::string line;
  std::optional<Hierarchy> unified;
  while (std::getline(in, line)) {
    // "ID:CONTROLLERS:PATH"; the path may itself hold ':'.
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    if (parts[0] == "0" && parts[1].empty()) {
      unified = Hierarchy{parts[2], sources.cgroup_root, "memory.max"};
    }
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      // v1: the memory controller's own hierarchy wins over a unified one
      // (hybrid hosts mount v2 without controllers).
      if (controller == "memory") {
        return Hierarchy{parts[2], sources.cgroup_root + "/memory",
                         "memory.limit_in_bytes"};
      }
    }
  }
  return unified;
}

}  // namespace

MemoryBudget AvailableMemory(const MemoryBudgetSources& sources) {
  MemoryBudget budget{sources.physical_bytes ? sources.physical_bytes : PhysicalMemory(),
                      "physical memory"};
  std::optional<Hierarchy> hierarchy = FindHierarchy(sources);
  if (!hierarchy) return budget;
  // From the process's own cgroup up to the root: any of them may cap it.
  std::string path(absl::StripSuffix(hierarchy->path, "/"));
  while (true) {
    const std::string file = hierarchy->root + path + "/" + hierarchy->limit_file;
    if (std::optional<std::uint64_t> limit = ReadLimit(file);
        limit && *limit < budget.bytes) {
      budget = {*limit, file};
    }
    if (path.empty()) break;
    path.resize(path.rfind('/'));
  }
  return budget;
}

}  // namespace memd
