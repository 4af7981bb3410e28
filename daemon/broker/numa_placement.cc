#include "daemon/broker/numa_placement.h"

#include <string>

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/numa.h"

namespace memd::broker {
namespace {

// Enough of a client's text to recognise it, short enough for any message.
constexpr std::size_t kMaxEcho = 16;

std::string NodesText(int nodes) {
  if (nodes <= 1) return "this machine has one NUMA node (0)";
  return absl::StrCat("this machine has ", nodes, " NUMA nodes (0-", nodes - 1, ")");
}

}  // namespace

std::string NumaRequest::ToString() const {
  switch (kind) {
    case Kind::kDefault:
      return "";
    case Kind::kOff:
      return "off";
    case Kind::kAuto:
      return "auto";
    case Kind::kNode:
      return absl::StrCat(node);
  }
  return "";
}

absl::StatusOr<NumaRequest> ParseNumaRequest(std::string_view text) {
  if (text.empty()) return NumaRequest{};
  if (text == "off") return NumaRequest{NumaRequest::Kind::kOff, -1};
  if (text == "auto") return NumaRequest{NumaRequest::Kind::kAuto, -1};
  // Decimal digits only: no sign, no space, no "0x"; at most 4 of them.
  const bool digits = text.size() <= 4 && absl::c_all_of(text, [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
  int node = -1;
  if (digits && absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &node) &&
      node < kMaxNumaNodes) {
    return NumaRequest{NumaRequest::Kind::kNode, node};
  }
  const std::string_view prefix = text.substr(0, kMaxEcho);
  return absl::InvalidArgumentError(absl::StrCat(
      "numa ", QuotedForMessage(prefix), text.size() > kMaxEcho ? "..." : "", " (", text.size(),
      " bytes) is not auto, off or a node number 0..", kMaxNumaNodes - 1));
}

absl::StatusOr<int> ChooseNumaNode(const NumaRequest& asked, const NumaRequest& daemon_default,
                                   const Location& location, const NumaFacts& facts) {
  const bool by_default = asked.kind == NumaRequest::Kind::kDefault;
  const NumaRequest& request = by_default ? daemon_default : asked;
  if (request.kind == NumaRequest::Kind::kOff || request.kind == NumaRequest::Kind::kDefault) {
    return -1;
  }
  if (location.kind == Location::Kind::kDevice) {
    if (by_default) return -1;
    return absl::InvalidArgumentError(absl::StrCat(
        "numa ", request.ToString(), " places host and pinned buffers only; ",
        location.ToString(), " memory is on its GPU"));
  }
  if (request.kind == NumaRequest::Kind::kNode) {
    // A kernel without NUMA lists no node yet has node 0.
    const int nodes = std::max(facts.nodes, 1);
    if (request.node >= nodes) {
      return absl::InvalidArgumentError(absl::StrCat("NUMA node ", request.node,
                                                     " does not exist: ", NodesText(nodes)));
    }
    return request.node;
  }
  if (facts.nodes <= 1) return -1;
  if (location.kind == Location::Kind::kPinned && facts.gpu_node.has_value()) {
    return *facts.gpu_node;
  }
  return facts.creator_node.value_or(-1);
}

NumaPlacement::NumaPlacement(Options options) : options_(std::move(options)) {
  facts_.nodes = numa::NodeCount(options_.sysfs_root);
  if (!options_.gpu_pci_address.empty()) {
    facts_.gpu_node = numa::NodeOfPciDevice(options_.gpu_pci_address, options_.sysfs_root);
  }
}

absl::StatusOr<int> NumaPlacement::Choose(const NumaRequest& asked, const Location& location,
                                          pid_t creator) const {
  NumaFacts facts = facts_;
  const NumaRequest& request =
      asked.kind == NumaRequest::Kind::kDefault ? options_.daemon_default : asked;
  // Only auto for memory its GPU does not decide reads the creator's CPU.
  if (request.kind == NumaRequest::Kind::kAuto && facts.nodes > 1 &&
      !(location.kind == Location::Kind::kPinned && facts.gpu_node.has_value())) {
    if (auto cpu = numa::LastCpuOf(creator, options_.proc_root)) {
      facts.creator_node = numa::NodeOfCpu(*cpu, options_.sysfs_root);
    }
  }
  return ChooseNumaNode(asked, options_.daemon_default, location, facts);
}

std::string NumaPlacement::Describe() const {
  std::string text = absl::StrCat("numa: default ", options_.daemon_default.ToString(), "; ",
                                  NodesText(facts_.nodes));
  if (facts_.nodes <= 1) {
    absl::StrAppend(&text, ": auto places nothing (buffers report numa node -1); an explicit "
                           "node 0 is bound, harmlessly");
    return text;
  }
  if (options_.gpu_pci_address.empty()) {
    absl::StrAppend(&text, "; no GPU: auto uses the creating process's node");
  } else if (facts_.gpu_node.has_value()) {
    absl::StrAppend(&text, "; pinned memory's GPU ", options_.gpu_pci_address, " is on node ",
                    *facts_.gpu_node);
  } else {
    absl::StrAppend(&text, "; sysfs does not say the node of GPU ", options_.gpu_pci_address,
                    ": auto uses the creating process's node");
  }
  return text;
}

}  // namespace memd::broker
