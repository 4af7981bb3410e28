#pragma once

// Advice: what `memctl advise` and the Advise RPC recommend, from the facts
// of the buffers a caller may see and what UsageTracker counted of them.
//
// Buffers are grouped by name prefix (the name up to and including its last
// '/'; a name without '/' is a group of its own) and each group is judged by
// four rules (AdviceRules has the thresholds and their defaults):
//   prefetch      the group was opened >= prefetch_opens times in the last
//                 hour on a device where the opened buffer has no replica:
//                 copy it there ahead of the opens
//   move          every open of the group's buffers in the last hour (at
//                 least move_opens) was at one location that is not their
//                 home: make that their home (replaces prefetch)
//   drop_replica  replicas away from the home, not leased, not opened there
//                 for replica_idle (1 day): free them
//   unlink        buffers not opened for unlink_idle (2 days), or never
//                 opened since counting began that long ago, none leased:
//                 candidates for removal (a buffer here is not also judged by
//                 drop_replica)
// Each recommendation names the rule's numbers in its evidence, bytes in
// binary units ("opened 412 times on device:0 and device:1, lives on host,
// 96 GiB copied in the last hour").
//
// Pure policy: no broker state, no locks, no clock. Not yet wired into the
// broker.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/location.h"
#include "daemon/broker/usage_tracker.h"

namespace memd::broker {

// One copy of a buffer, the home included.
struct ReplicaFacts {
  Location location;
  std::uint64_t bytes = 0;  // What it takes there.
  bool leased = false;      // Someone holds a lease on it.
};

// What advice knows of one buffer the caller may see.
struct BufferFacts {
  std::string name;
  std::uint64_t size = 0;
  Location home;
  std::vector<ReplicaFacts> replicas;  // Every copy, the home's included.
  bool sealed = false;
  // When counting began for this buffer: its creation, or memd's start when
  // later (a restart forgets usage, so a buffer is not idle for longer than
  // memd has watched it).
  absl::Time counted_since;
  BufferUsage usage;        // UsageTracker::Of.
  BufferActivity activity;  // UsageTracker::Activity at the same `now`.
};

// The thresholds. Immutable value; thread-compatible.
struct AdviceRules {
  // Opens in the last hour, per device, of a group's buffers that have no
  // replica there, that make the device a prefetch target. 16: a handful of
  // opens is a test or a one-off; a copy per open beyond that is a pattern.
  std::uint64_t prefetch_opens = 16;
  // Opens in the last hour, all at one location away from the home, that
  // make the group a move candidate.
  std::uint64_t move_opens = 16;
  // A replica away from the home not opened there for this long is dropped.
  absl::Duration replica_idle = absl::Hours(24);
  // A buffer not opened for this long is an unlink candidate.
  absl::Duration unlink_idle = absl::Hours(48);
};

// The protocol's Recommendation, field by field.
struct Recommendation {
  // A buffer name, or a prefix ending in "/" for a group of buffers.
  std::string subject;
  // "prefetch", "move", "drop_replica", "unlink".
  std::string action;
  // Where to copy to (prefetch, move), or where memory would be freed
  // (drop_replica, unlink), in report order.
  std::vector<std::string> locations;
  // The numbers behind it, in words.
  std::string evidence;
  // Bytes it would copy (prefetch, move) or free (drop_replica, unlink).
  std::uint64_t bytes = 0;
};

// Recommendations for the buffers of `buffers` whose names start with
// `prefix` ("" for all), judged as of `now`. Ordered by subject (bytewise),
// then by action in the order prefetch, move, drop_replica, unlink; at most
// one recommendation per subject and action. Empty for a quiet node.
std::vector<Recommendation> Advise(absl::Span<const BufferFacts> buffers,
                                   std::string_view prefix, absl::Time now,
                                   const AdviceRules& rules = {});

// "5 minutes", "1 hour", "2 days": the largest whole unit, rounded down.
std::string FormatAge(absl::Duration age);

}  // namespace memd::broker
