#pragma once

// NUMA placement of host and pinned buffers (docs/design.md, "NUMA
// placement"): which node a new buffer's pages are bound to. A create asks
// for nothing (the daemon's default), "off", "auto" or a node number; the
// daemon's default (config `numa`) is "off" unless the operator says
// otherwise, so nothing changes for a client that asks for nothing.
//
// ChooseNumaNode is the whole rule, a pure function of what was asked and
// what the machine is (NumaFacts); NumaPlacement reads those facts from a
// sysfs and a proc tree (fake ones in tests).

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/location.h"

namespace memd::broker {

// What a create (or the daemon's default) asks of NUMA placement.
struct NumaRequest {
  enum class Kind {
    kDefault,  // Nothing: the daemon's default decides (a request only).
    kOff,      // Not bound: the kernel places pages (first touch).
    kAuto,     // Pinned: the served GPU's node; else the creator's node.
    kNode,     // `node`.
  };
  Kind kind = Kind::kDefault;
  int node = -1;

  friend bool operator==(const NumaRequest&, const NumaRequest&) = default;
  // "", "off", "auto" or the node, as Parse reads it.
  std::string ToString() const;
};

// The most nodes a node number may name (the kernel's MAX_NUMNODES bound).
inline constexpr int kMaxNumaNodes = 1024;

// "" (kDefault), "off", "auto", or a node number "0".."1023" in decimal.
// Errors: INVALID_ARGUMENT, short (a client's megabyte is not echoed: at
// most a short escaped prefix).
absl::StatusOr<NumaRequest> ParseNumaRequest(std::string_view text);

// What the machine is, as the rule needs it.
struct NumaFacts {
  int nodes = 0;                     // NUMA nodes (0: a kernel without NUMA).
  std::optional<int> gpu_node;       // The node of the GPU pinned memory serves.
  std::optional<int> creator_node;   // The node of the CPU the creator last ran on.
};

// The node to bind a new buffer at `location` to, or -1 for none.
//  * `asked` kDefault takes `daemon_default`.
//  * off: -1.
//  * A node: that node where the machine has it (node 0 of a one-node
//    machine too: harmless, and what was asked), else INVALID_ARGUMENT with
//    the number of nodes.
//  * auto: -1 on a machine of one node (or none): there is nothing to
//    choose. Else pinned memory goes to its GPU's node, and host memory
//    (or pinned memory whose GPU's node sysfs does not say) to the
//    creator's; -1 when neither is known.
//  * Device memory is where its GPU is: INVALID_ARGUMENT when the create
//    itself asked for a node or auto, -1 when only the default did.
absl::StatusOr<int> ChooseNumaNode(const NumaRequest& asked, const NumaRequest& daemon_default,
                                   const Location& location, const NumaFacts& facts);

/// The daemon's NUMA placement: its default and the machine's facts, read
/// from `sysfs_root` (node count at construction, GPU node from
/// `gpu_pci_address`) and `proc_root` (each creator's last CPU, per call).
/// Immutable after construction, so thread-safe.
class NumaPlacement {
 public:
  struct Options {
    NumaRequest daemon_default = {NumaRequest::Kind::kOff, -1};
    std::string sysfs_root = "/sys";
    std::string proc_root = "/proc";
    // "dddd:bb:dd.f" of the GPU pinned memory serves (the backend's first
    // device); empty on a machine without one.
    std::string gpu_pci_address;
  };
  explicit NumaPlacement(Options options);

  // ChooseNumaNode for a buffer `creator` makes at `location`. Reads
  // <proc>/PID/stat only for auto host memory. Errors: ChooseNumaNode's.
  absl::StatusOr<int> Choose(const NumaRequest& asked, const Location& location,
                             pid_t creator) const;

  int nodes() const { return facts_.nodes; }
  // One line for the log at start: the default, the nodes, the GPU's node,
  // and why NUMA placement does nothing here when it does nothing.
  std::string Describe() const;

 private:
  Options options_;
  NumaFacts facts_;  // Without creator_node, filled per call.
};

}  // namespace memd::broker
