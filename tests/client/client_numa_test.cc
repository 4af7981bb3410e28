// NUMA placement through libmemd against a daemon in this process: the
// node a create asks for is the policy of the very mapping the client
// writes (get_mempolicy), and is reported; a node the machine lacks is
// refused; the pool never gives placed pages to another node's request.
// This machine has one node (0); a fake two-node sysfs tree stands in for
// a bigger one where the daemon's default is auto.

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/numa.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/in_process_daemon.h"
#include "tests/support/fake_numa.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kSmall = 64 << 10;  // Carved from a shared segment.

class ClientNumaTest : public test::InProcessDaemonTest {
 protected:
  // The node the policy of the client's own mapping of `buffer` names,
  // after every page of it was written.
  static std::optional<int> PolicyAfterWriting(Buffer& buffer) {
    std::span<std::byte> bytes = buffer.mutable_data();
    std::memset(bytes.data(), 0x5a, bytes.size());
    return numa::PolicyNodeOf(bytes.data() + bytes.size() - 1);
  }
};

TEST_F(ClientNumaTest, NodeZeroIsBoundAndReportedAndAutoOnOneNodeIsANoOp) {
  ASSERT_LE(numa::NodeCount(), 1) << "written for a machine of one node";
  StartDaemon();
  for (const char* location : {"host", "pinned"}) {
    auto placed = client_->Create(absl::StrCat("numa/zero/", location), 1 << 20,
                                  {.location = location, .numa = "0"});
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->info().numa_node, 0);
    EXPECT_EQ(PolicyAfterWriting(*placed), 0) << location;
    EXPECT_EQ(numa::NodeOfPage(placed->data().data()), 0);
    EXPECT_EQ(client_->Stat(absl::StrCat("numa/zero/", location))->numa_node, 0);
  }
  for (const char* numa : {"auto", "off", ""}) {
    auto unbound = client_->Create(absl::StrCat("numa/unbound/", *numa ? numa : "default"), 1 << 20,
                                   {.numa = numa});
    ASSERT_TRUE(unbound.ok()) << unbound.status();
    EXPECT_EQ(unbound->info().numa_node, -1) << numa;
    EXPECT_EQ(PolicyAfterWriting(*unbound), std::nullopt) << numa;
  }
}

TEST_F(ClientNumaTest, ANodeTheMachineLacksIsInvalidArgumentWithTheNumberOfNodes) {
  StartDaemon();
  auto refused = client_->Create("numa/seven", 4096, {.numa = "7"});
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("NUMA node 7 does not exist: this machine has one NUMA node"));
  auto device = client_->Create("numa/device", 4096, {.location = "device:0", .numa = "0"});
  EXPECT_TRUE(absl::IsInvalidArgument(device.status())) << device.status();
  EXPECT_TRUE(absl::IsNotFound(client_->Stat("numa/seven").status()));
}

// Small buffers share segments: one freed by a placed buffer must not serve
// an unbound one (nor the other way round), or the node reported would lie.
TEST_F(ClientNumaTest, APlacedSegmentNeverServesARequestForAnotherNode) {
  StartDaemon();
  {
    auto placed = client_->Create("numa/first", kSmall, {.numa = "0"});
    ASSERT_TRUE(placed.ok()) << placed.status();
    ASSERT_TRUE(client_->Unlink("numa/first").ok());
  }
  auto unbound = client_->Create("numa/second", kSmall);
  ASSERT_TRUE(unbound.ok()) << unbound.status();
  EXPECT_EQ(PolicyAfterWriting(*unbound), std::nullopt);
  auto placed = client_->Create("numa/third", kSmall, {.numa = "0"});
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(PolicyAfterWriting(*placed), 0);
  EXPECT_NE(placed->info().numa_node, unbound->info().numa_node);
}

// On a (fake) machine of two nodes whose CPUs 0-511 are node 0's, the
// daemon's default auto binds a host buffer to its creator's node.
TEST_F(ClientNumaTest, TheDaemonsDefaultAutoBindsToTheCreatorsNodeOnTwoNodes) {
  test::FakeNumaMachine machine(2, 512);
  config_.numa = "auto";
  config_.numa_sysfs_root = machine.sysfs();
  StartDaemon();
  auto buffer = client_->Create("numa/auto", 1 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->info().numa_node, 0);
  EXPECT_EQ(PolicyAfterWriting(*buffer), 0);
  auto refused = client_->Create("numa/two", 4096, {.numa = "2"});
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("this machine has 2 NUMA nodes (0-1)"));
}

}  // namespace
}  // namespace memd
