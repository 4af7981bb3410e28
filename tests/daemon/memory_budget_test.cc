#include "daemon/memory_budget.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// A fake /proc/self/cgroup and /sys/fs/cgroup.
class MemoryBudgetTest : public ::testing::Test {
 protected:
  void Membership(const std::string& text) {
    std::ofstream(dir_.Join("cgroup")) << text;
  }
  void Limit(const std::string& cgroup, const std::string& file, const std::string& value) {
    const std::string path = dir_.Join("fs") + cgroup;
    std::filesystem::create_directories(path);
    std::ofstream(path + "/" + file) << value << "\n";
  }
  MemoryBudget Budget() {
    return AvailableMemory({.proc_self_cgroup = dir_.Join("cgroup"),
                            .cgroup_root = dir_.Join("fs"),
                            .physical_bytes = 64 * kGiB});
  }

  test::TempDir dir_;
};

TEST_F(MemoryBudgetTest, WithoutCgroupsItIsThePhysicalMemory) {
  MemoryBudget budget = Budget();  // No files at all.
  EXPECT_EQ(budget.bytes, 64 * kGiB);
  EXPECT_EQ(budget.source, "physical memory");
  EXPECT_GT(AvailableMemory().bytes, 0u);  // This machine's.
}

TEST_F(MemoryBudgetTest, AContainersMemoryMaxCapsIt) {
  Membership("0::/\n");  // Inside a cgroup namespace: the root is the pod's.
  Limit("", "memory.max", "12884901888");
  MemoryBudget budget = Budget();
  EXPECT_EQ(budget.bytes, 12 * kGiB);
  EXPECT_EQ(budget.source, dir_.Join("fs") + "/memory.max");
}

TEST_F(MemoryBudgetTest, TheTightestLimitOnThePathWins) {
  Membership("0::/system.slice/memd.service\n");
  Limit("/system.slice/memd.service", "memory.max", "max");
  Limit("/system.slice", "memory.max", std::to_string(20 * kGiB));
  Limit("", "memory.max", std::to_string(30 * kGiB));
  EXPECT_EQ(Budget().bytes, 20 * kGiB);

  Limit("/system.slice/memd.service", "memory.max", std::to_string(2 * kGiB));
  EXPECT_EQ(Budget().bytes, 2 * kGiB);
}

TEST_F(MemoryBudgetTest, ALimitAbovePhysicalMemoryChangesNothing) {
  Membership("0::/a\n");
  Limit("/a", "memory.max", std::to_string(128 * kGiB));
  EXPECT_EQ(Budget().source, "physical memory");
}

TEST_F(MemoryBudgetTest, ReadsTheV1MemoryControllerOnOlderHosts) {
  Membership(
      "12:pids:/kubepods/pod1\n"
      "4:cpu,cpuacct,memory:/kubepods/pod1/ctr\n"
      "0::/\n");
  Limit("/memory/kubepods/pod1/ctr", "memory.limit_in_bytes", "9223372036854771712");
  Limit("/memory/kubepods/pod1", "memory.limit_in_bytes", std::to_string(6 * kGiB));
  Limit("", "memory.max", std::to_string(1 * kGiB));  // Unified, no controllers: ignored.
  EXPECT_EQ(Budget().bytes, 6 * kGiB);
}

TEST_F(MemoryBudgetTest, GarbageInALimitFileIsSkipped) {
  Membership("0::/a\n");
  Limit("/a", "memory.max", "lots");
  Limit("", "memory.max", std::to_string(3 * kGiB));
  EXPECT_EQ(Budget().bytes, 3 * kGiB);
}

}  // namespace
}  // namespace memd
