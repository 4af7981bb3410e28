#pragma once

// What memd keeps across its own death (docs/design.md, "Durability"): the
// segments it reserved and the buffers carved from them, as plain data. The
// state file (state_file.h) stores it in a memfd that outlives memd in the
// service manager's descriptor store, next to each segment's descriptor.

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "absl/status/status.h"

namespace memd::durable {

// A segment a pool reserved: pool::Allocation::segment_id and what the pool
// needs to take it back (pool::Pool::Adopt). Its descriptor is stored apart,
// under SegmentFdName(id).
struct SegmentEntry {
  std::uint64_t id = 0;
  std::string location;     // Location::ToString(): "host", "pinned", "device:N".
  std::string device_uuid;  // A device segment's GPU ("GPU-..."), checked on adoption.
  std::uint64_t bytes = 0;
  bool small = false;  // Carved by size classes (CarvingPool's small segments).
  // The pool::Domain it serves.
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t mode = 0;

  friend bool operator==(const SegmentEntry&, const SegmentEntry&) = default;
};

// A buffer from creation until its memory goes back to its pool (so also
// while unlinked but leased: a client may still map it, and its bytes must
// not be handed to anyone else).
struct BufferEntry {
  std::uint64_t id = 0;  // broker::BufferId.
  std::string name;
  std::uint64_t size = 0;
  std::string location;
  std::uint32_t owner_uid = 0;
  std::uint32_t owner_gid = 0;
  std::uint32_t mode = 0;
  bool sealed = false;
  bool ephemeral = false;
  bool unlinked = false;
  std::int64_t created_unix_ns = 0;
  std::int64_t sealed_unix_ns = 0;  // 0 while not sealed.
  std::int32_t creator_pid = 0;
  std::map<std::string, std::string> attrs;
  // Where it lives: pool::Allocation's segment, offset and bytes.
  std::uint64_t segment_id = 0;
  std::uint64_t offset = 0;
  std::uint64_t allocation_bytes = 0;

  friend bool operator==(const BufferEntry&, const BufferEntry&) = default;
};

struct DurableState {
  // Starts of memd that adopted this state, counting the first: a start
  // that adopts writes generation + 1.
  std::uint64_t generation = 0;
  std::map<std::uint64_t, SegmentEntry> segments;
  std::map<std::uint64_t, BufferEntry> buffers;

  friend bool operator==(const DurableState&, const DurableState&) = default;
};

struct DropSegment {
  std::uint64_t id = 0;
  friend bool operator==(const DropSegment&, const DropSegment&) = default;
};
struct DropBuffer {
  std::uint64_t id = 0;
  friend bool operator==(const DropBuffer&, const DropBuffer&) = default;
};
struct SetGeneration {
  std::uint64_t generation = 0;
  friend bool operator==(const SetGeneration&, const SetGeneration&) = default;
};

// One change to the state: an entry put (added or replaced by id) or
// dropped. A batch of changes is one atomic update of the state file.
using Change = std::variant<SegmentEntry, DropSegment, BufferEntry, DropBuffer, SetGeneration>;

// Applies `change` to `state`. Dropping an id that is not there is a no-op.
void Apply(const Change& change, DurableState& state);

// Whether `state` is one memd could have written: every buffer in a segment
// of its location and domain, inside it and overlapping no other, sizes and
// ids non-zero, names valid and unique among linked buffers, attributes and
// modes valid. Errors: DATA_LOSS naming the first entry that is not.
absl::Status Validate(const DurableState& state);

// The names descriptors are stored under in the service manager's store
// (FDNAME: printable ASCII, no ':').
std::string SegmentFdName(std::uint64_t segment_id);   // "memd.segment.<id>"
std::string StateFdName(std::uint64_t epoch);          // "memd.state.<epoch>"

}  // namespace memd::durable
