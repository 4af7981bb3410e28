#pragma once

// Fake sysfs and proc trees for NUMA placement (common/numa.h,
// daemon/broker/numa_placement.h): a machine of several nodes, their CPUs,
// a GPU on one of them and processes that last ran on a given CPU, without
// such a machine. Owns the trees (removed at destruction).

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

class FakeNumaMachine {
 public:
  // Node i holds CPUs [i * cpus_per_node, (i + 1) * cpus_per_node).
  FakeNumaMachine(int nodes, int cpus_per_node) {
    const std::filesystem::path node_dir = sysfs() + "/devices/system/node";
    std::filesystem::create_directories(node_dir);
    for (int i = 0; i < nodes; ++i) {
      const std::filesystem::path node = node_dir / absl::StrCat("node", i);
      std::filesystem::create_directories(node);
      const int first = i * cpus_per_node;
      std::ofstream(node / "cpulist") << first << "-" << first + cpus_per_node - 1 << "\n";
    }
    std::ofstream(node_dir / "possible") << "0-" << nodes - 1 << "\n";
  }

  // A PCI device (a GPU) at `bus_id` on `node` (-1: sysfs does not say).
  void AddPciDevice(const std::string& bus_id, int node) {
    const std::filesystem::path device = sysfs() + "/bus/pci/devices/" + bus_id;
    std::filesystem::create_directories(device);
    std::ofstream(device / "numa_node") << node << "\n";
  }

  // <proc>/PID/stat of a process whose command has a space and a ')' (as
  // a hostile one may), last run on `cpu` (field 39).
  void AddProcess(pid_t pid, int cpu) {
    const std::filesystem::path dir = proc() + "/" + std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::string stat = absl::StrCat(pid, " (evil) name) S");
    for (int field = 4; field <= 52; ++field) {
      absl::StrAppend(&stat, " ", field == 39 ? cpu : field);
    }
    std::ofstream(dir / "stat") << stat << "\n";
  }

  std::string sysfs() const { return dir_.Join("sys"); }
  std::string proc() const { return dir_.Join("proc"); }

 private:
  TempDir dir_;
};

}  // namespace memd::test
