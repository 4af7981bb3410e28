// broker/numa_placement: the rule (a pure function of the request, the
// daemon's default and the machine) and the facts NumaPlacement reads from
// a fake two-node machine whose GPU hangs off node 1.

#include "daemon/broker/numa_placement.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_numa.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;
using Kind = NumaRequest::Kind;

const NumaRequest kDefault{};
const NumaRequest kOff{Kind::kOff, -1};
const NumaRequest kAuto{Kind::kAuto, -1};
NumaRequest Node(int node) { return NumaRequest{Kind::kNode, node}; }

// Two nodes, the GPU on node 1, the creator last on a CPU of node 0.
const NumaFacts kTwoNodes{.nodes = 2, .gpu_node = 1, .creator_node = 0};
const NumaFacts kOneNode{.nodes = 1, .gpu_node = 0, .creator_node = 0};

TEST(NumaRequestTest, ParsesTheDefaultOffAutoAndNodeNumbers) {
  EXPECT_EQ(*ParseNumaRequest(""), kDefault);
  EXPECT_EQ(*ParseNumaRequest("off"), kOff);
  EXPECT_EQ(*ParseNumaRequest("auto"), kAuto);
  EXPECT_EQ(*ParseNumaRequest("0"), Node(0));
  EXPECT_EQ(*ParseNumaRequest("1023"), Node(1023));
  EXPECT_EQ(Node(7).ToString(), "7");
}

TEST(NumaRequestTest, AnythingElseIsInvalidArgumentInAShortMessage) {
  for (const std::string& text : std::vector<std::string>{"-1", "+1", " 1", "1 ", "0x1", "abc", "1024", "99999",
                                 "AUTO", std::string(1 << 20, '7')}) {
    auto parsed = ParseNumaRequest(text);
    ASSERT_TRUE(absl::IsInvalidArgument(parsed.status())) << text.substr(0, 20);
    EXPECT_LT(parsed.status().message().size(), 200u);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("auto, off or a node number"));
  }
  EXPECT_THAT(std::string(ParseNumaRequest(std::string(1 << 20, 'x')).status().message()),
              HasSubstr("(1048576 bytes)"));
}

TEST(ChooseNumaNodeTest, AutoPlacesPinnedOnItsGpusNodeAndHostOnTheCreators) {
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Pinned(), kTwoNodes), 1);
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Host(), kTwoNodes), 0);
  // Pinned memory whose GPU's node sysfs does not say: the creator's.
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Pinned(),
                            NumaFacts{.nodes = 2, .gpu_node = std::nullopt, .creator_node = 1}),
            1);
  // Neither known: not bound.
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Host(), NumaFacts{.nodes = 2, .gpu_node = std::nullopt,
                                                              .creator_node = std::nullopt}),
            -1);
}

TEST(ChooseNumaNodeTest, TheRequestWinsOverTheDefaultWhichAppliesWhenItAsksNothing) {
  EXPECT_EQ(*ChooseNumaNode(kDefault, kOff, Location::Pinned(), kTwoNodes), -1);
  EXPECT_EQ(*ChooseNumaNode(kDefault, kAuto, Location::Pinned(), kTwoNodes), 1);
  EXPECT_EQ(*ChooseNumaNode(kDefault, Node(1), Location::Host(), kTwoNodes), 1);
  EXPECT_EQ(*ChooseNumaNode(kOff, kAuto, Location::Pinned(), kTwoNodes), -1);
  EXPECT_EQ(*ChooseNumaNode(Node(0), kAuto, Location::Pinned(), kTwoNodes), 0);
}

TEST(ChooseNumaNodeTest, ANodeTheMachineLacksIsRefusedWithTheNumberOfNodes) {
  auto refused = ChooseNumaNode(Node(2), kOff, Location::Host(), kTwoNodes);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_EQ(refused.status().message(),
            "NUMA node 2 does not exist: this machine has 2 NUMA nodes (0-1)");
  refused = ChooseNumaNode(Node(1), kOff, Location::Host(), kOneNode);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("one NUMA node (0)"));
  // The daemon's own default is checked against the machine too.
  EXPECT_TRUE(absl::IsInvalidArgument(
      ChooseNumaNode(kDefault, Node(3), Location::Host(), kTwoNodes).status()));
}

TEST(ChooseNumaNodeTest, OnOneNodeAutoIsANoOpAndNodeZeroIsBound) {
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Pinned(), kOneNode), -1);
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Host(), kOneNode), -1);
  EXPECT_EQ(*ChooseNumaNode(kDefault, kAuto, Location::Host(), kOneNode), -1);
  EXPECT_EQ(*ChooseNumaNode(Node(0), kOff, Location::Host(), kOneNode), 0);
  // A kernel without NUMA lists no node; node 0 is still there.
  EXPECT_EQ(*ChooseNumaNode(Node(0), kOff, Location::Host(), NumaFacts{}), 0);
  EXPECT_EQ(*ChooseNumaNode(kAuto, kOff, Location::Host(), NumaFacts{}), -1);
}

TEST(ChooseNumaNodeTest, DeviceMemoryIsRefusedWhenAskedAndLeftAloneByTheDefault) {
  auto refused = ChooseNumaNode(Node(0), kOff, Location::Device(0), kTwoNodes);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("host and pinned buffers only"));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ChooseNumaNode(kAuto, kOff, Location::Device(0), kTwoNodes).status()));
  EXPECT_EQ(*ChooseNumaNode(kDefault, kAuto, Location::Device(0), kTwoNodes), -1);
  EXPECT_EQ(*ChooseNumaNode(kDefault, Node(1), Location::Device(0), kTwoNodes), -1);
}

class NumaPlacementTest : public ::testing::Test {
 protected:
  NumaPlacementTest() : machine_(2, 4) {
    machine_.AddPciDevice("0000:3b:00.0", 1);
    machine_.AddProcess(4242, 6);  // CPU 6: node 1.
    machine_.AddProcess(4343, 1);  // CPU 1: node 0.
  }
  NumaPlacement Placement(NumaRequest daemon_default, std::string gpu = "0000:3b:00.0") {
    return NumaPlacement({.daemon_default = daemon_default,
                          .sysfs_root = machine_.sysfs(),
                          .proc_root = machine_.proc(),
                          .gpu_pci_address = std::move(gpu)});
  }

  test::FakeNumaMachine machine_;
};

TEST_F(NumaPlacementTest, ReadsTheNodesTheGpusNodeAndEachCreatorsCpu) {
  NumaPlacement placement = Placement(kOff);
  EXPECT_EQ(placement.nodes(), 2);
  EXPECT_EQ(*placement.Choose(kAuto, Location::Pinned(), 4343), 1) << "the GPU's node";
  EXPECT_EQ(*placement.Choose(kAuto, Location::Host(), 4242), 1);
  EXPECT_EQ(*placement.Choose(kAuto, Location::Host(), 4343), 0);
  EXPECT_EQ(*placement.Choose(kAuto, Location::Host(), 999999), -1) << "a process gone";
  EXPECT_EQ(*placement.Choose(kDefault, Location::Host(), 4242), -1) << "default off";
  EXPECT_THAT(placement.Describe(), HasSubstr("2 NUMA nodes (0-1); pinned memory's GPU "
                                              "0000:3b:00.0 is on node 1"));
}

TEST_F(NumaPlacementTest, WithoutAGpuAutoPinnedFollowsTheCreator) {
  NumaPlacement placement = Placement(kAuto, "");
  EXPECT_EQ(*placement.Choose(kDefault, Location::Pinned(), 4343), 0);
  EXPECT_EQ(*placement.Choose(kDefault, Location::Pinned(), 4242), 1);
  EXPECT_THAT(placement.Describe(), HasSubstr("no GPU"));
}

TEST(NumaPlacementOneNodeTest, SaysWhyItDoesNothing) {
  test::FakeNumaMachine machine(1, 4);
  NumaPlacement placement({.daemon_default = kAuto,
                           .sysfs_root = machine.sysfs(),
                           .proc_root = "/proc",
                           .gpu_pci_address = ""});
  EXPECT_EQ(*placement.Choose(kDefault, Location::Host(), ::getpid()), -1);
  EXPECT_THAT(placement.Describe(), HasSubstr("this machine has one NUMA node (0): auto "
                                              "places nothing"));
}

}  // namespace
}  // namespace memd::broker
