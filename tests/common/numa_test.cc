// common/numa: a GPU's node from a sysfs tree the test writes, and memory
// placed on a node of this machine.

#include "common/numa.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd::numa {
namespace {

// A sysfs tree with `nodes` nodes and one PCI device whose numa_node says
// `device_node`.
class FakeSysfs {
 public:
  FakeSysfs(int nodes, const std::string& bus_id, const std::string& device_node) {
    const std::filesystem::path root = dir_.path();
    std::filesystem::create_directories(root / "devices/system/node");
    for (int i = 0; i < nodes; ++i) {
      std::filesystem::create_directories(root / "devices/system/node" / ("node" + std::to_string(i)));
    }
    // What the kernel lists beside the nodes: not nodes.
    std::ofstream(root / "devices/system/node/possible") << "0-" << nodes - 1 << "\n";
    std::filesystem::create_directories(root / "devices/system/node/power");
    std::filesystem::create_directories(root / "bus/pci/devices" / bus_id);
    std::ofstream(root / "bus/pci/devices" / bus_id / "numa_node") << device_node << "\n";
  }
  const std::string& root() const { return dir_.path(); }

 private:
  test::TempDir dir_;
};

TEST(NumaTest, NodesAreTheNodeDirectoriesOnly) {
  FakeSysfs sysfs(2, "0000:3b:00.0", "1");
  EXPECT_EQ(NodeCount(sysfs.root()), 2);
  EXPECT_EQ(NodeCount(sysfs.root() + "/nowhere"), 0);
}

TEST(NumaTest, APciDevicesNodeIsWhatSysfsSays) {
  EXPECT_EQ(PciBusId(0, 0x3b, 0), "0000:3b:00.0");
  EXPECT_EQ(PciBusId(1, 0xc1, 0x1f), "0001:c1:1f.0");
  FakeSysfs known(2, "0000:3b:00.0", "1");
  EXPECT_EQ(NodeOfPciDevice("0000:3b:00.0", known.root()), 1);
  EXPECT_EQ(NodeOfPciDevice("0000:3c:00.0", known.root()), std::nullopt) << "no such device";
  FakeSysfs unknown(1, "0000:3b:00.0", "-1");
  EXPECT_EQ(NodeOfPciDevice("0000:3b:00.0", unknown.root()), std::nullopt);
  FakeSysfs garbage(1, "0000:3b:00.0", "x");
  EXPECT_EQ(NodeOfPciDevice("0000:3b:00.0", garbage.root()), std::nullopt);
}

TEST(NumaTest, MemoryMappedOnANodeHasEveryPageThere) {
  if (NodeCount() == 0) GTEST_SKIP() << "this kernel lists no NUMA nodes";
  constexpr std::uint64_t kBytes = 4 << 20;
  auto memory = NodeMemory::Map(kBytes, 0);
  ASSERT_TRUE(memory.ok()) << memory.status();
  ASSERT_EQ(memory->bytes().size(), kBytes);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (std::uint64_t at = 0; at < kBytes; at += page) {
    ASSERT_EQ(NodeOfPage(memory->bytes().data() + at), 0) << "page at " << at;
  }
  NodeMemory moved = std::move(*memory);
  EXPECT_TRUE(memory->bytes().empty());
  EXPECT_EQ(moved.bytes().size(), kBytes);
}

TEST(NumaTest, NoBytesOrANodeOutOfRangeIsInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(NodeMemory::Map(0, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NodeMemory::Map(4096, -1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NodeMemory::Map(4096, 5000).status()));
}

}  // namespace
}  // namespace memd::numa
