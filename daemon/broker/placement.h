#pragma once

// Automatic placement: where `location = auto` puts a new buffer.
//
// Place() picks one of the locations the caller may use right now from the
// request's size, its access hint and each location's free memory, and says in
// words which rule chose it and with which numbers (memd puts that text in the
// buffer's info). Without a hint it follows UniversalCompute's table:
//   size <  small (64 KiB)          pinned, else host
//   small <= size <= medium (16 MiB) a device that holds it, else host
//   size >  medium                   a device that keeps `headroom` (25%) of its
//                                    total free after it ("fits comfortably"),
//                                    else host
// A hint replaces the table (PlacementRules below lists each). Every rule ends
// in fallbacks to every other location kind, so placement fails only when no
// candidate has room. Among devices the one with the most free bytes wins
// (ties: the lowest ordinal), which spreads buffers over GPUs as they fill.
// A candidate the caller's process cannot map is never chosen.
//
// Pure policy: no broker state, no locks, no clock. Broker::ResolvePlacement
// (broker_placement.cc) builds the candidates and calls it.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/location.h"

namespace memd::broker {

// How the caller expects to use a buffer; "" or "none" is kNone.
enum class AccessHint { kNone, kDeviceFrequent, kHostFrequent, kReadMostly, kStreaming };

// Parses "none", "device_frequent", "host_frequent", "read_mostly",
// "streaming" (and "" as none). Errors: INVALID_ARGUMENT naming the text and
// the valid hints.
absl::StatusOr<AccessHint> ParseAccessHint(std::string_view text);
// The name ParseAccessHint reads back: "none", "device_frequent", ...
std::string_view AccessHintName(AccessHint hint);

// The tunables, as the configuration writes them:
//   ""                                       the defaults below
//   "small=64KiB,medium=16MiB,headroom=25%"  any subset, any order
// Sizes take binary units (common/bytes.h); headroom is a whole percentage
// from 0% to 99% ("%" optional). Immutable value; thread-compatible.
//
// What each hint does (the order in which locations are tried; each ends in
// the remaining kinds so that a full location never fails a create another
// one can hold):
//   none             the table above
//   device_frequent  a device that holds it, at any size; else pinned (a GPU
//                    reaches it by DMA), else host
//   host_frequent    host (the CPU is the user; pinning would only lock RAM),
//                    else pinned, else a device
//   read_mostly      a device that fits it comfortably, at any size; else host
//                    (a replica can follow to a device later), else pinned,
//                    else any device that holds it
//   streaming        pinned (copies to and from devices need no staging),
//                    else host, else a device
struct PlacementRules {
  // Below this a buffer is small.
  std::uint64_t small = std::uint64_t{64} << 10;
  // Up to and including this a buffer is medium; above, large.
  std::uint64_t medium = std::uint64_t{16} << 20;
  // Percent of a device's total that must stay free after a large (or
  // read_mostly) buffer is placed on it. 25%: memd's buffers are long-lived
  // and the GPU's other users (framework caches, activations, NCCL) allocate
  // outside memd, so a buffer placed too tight on a device turns into someone
  // else's out-of-memory; one placed on the host costs a copy and can gain a
  // device replica later.
  int headroom_percent = 25;

  // Errors: INVALID_ARGUMENT naming the part that is wrong (not KEY=VALUE,
  // unknown or repeated key, bad size, bad percentage, medium below small).
  static absl::StatusOr<PlacementRules> Parse(std::string_view text);
};

struct PlacementRequest {
  std::uint64_t size = 0;
  AccessHint hint = AccessHint::kNone;
};

// A location the caller may use right now and what it has.
struct PlacementCandidate {
  Location location;
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
  // False for a GPU the caller's process does not see or a memory the caller
  // cannot map: such a candidate is never chosen.
  bool mappable = true;
};

struct PlacementDecision {
  Location location;
  // Which rule chose it and with which numbers, e.g. "8 MiB is in 64 KiB-16
  // MiB: device; device:1 has the most free (12 GiB of 16 GiB)".
  std::string rule;
};

// Chooses a location for `request` among `candidates` (each location at most
// once; a missing "pinned" means the node has no pinned memory). A candidate
// holds the request when its free bytes are at least the size. Errors:
// INVALID_ARGUMENT for size 0, no mappable candidate or a location listed
// twice; RESOURCE_EXHAUSTED when no mappable candidate holds it (the message
// gives the size and each one's free bytes).
absl::StatusOr<PlacementDecision> Place(const PlacementRequest& request,
                                        absl::Span<const PlacementCandidate> candidates,
                                        const PlacementRules& rules);

}  // namespace memd::broker
