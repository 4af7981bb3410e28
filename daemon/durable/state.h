#pragma once

// What memd keeps across its own death (docs/design.md, "Durability"): the
// segments it reserved and the buffers carved from them, and its clients'
// sessions with the leases they hold on those buffers (for a client to
// re-claim them after a restart), as plain data. The state file
// (state_file.h) stores it in a memfd that outlives memd in the service
// manager's descriptor store, next to each segment's descriptor.

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
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
  // broker::RetentionName; empty (states written before it): pinned.
  std::string retention;
  // The NUMA node its pages were bound to; -1: not bound (and states
  // written before numa).
  std::int32_t numa_node = -1;

  friend bool operator==(const BufferEntry&, const BufferEntry&) = default;
};

// A session of the memd that wrote the state, kept so that its client,
// connecting again after a restart, can re-claim the leases it held
// (broker::Broker::Reclaim). Only a digest of its token is kept.
struct SessionEntry {
  std::uint64_t id = 0;        // broker::SessionId, non-zero.
  std::uint32_t uid = 0;       // The peer's uid.
  std::string token_digest;    // SHA-256 of the session's token: kTokenDigestBytes bytes.
  friend bool operator==(const SessionEntry&, const SessionEntry&) = default;
};
inline constexpr std::size_t kTokenDigestBytes = 32;

// A lease a recorded session holds on a recorded buffer.
struct LeaseEntry {
  std::uint64_t id = 0;          // broker::LeaseId, non-zero.
  std::uint64_t session_id = 0;  // A SessionEntry's id.
  std::uint64_t buffer_id = 0;   // A BufferEntry's id.
  bool writable = false;         // READ_WRITE (else READ).
  friend bool operator==(const LeaseEntry&, const LeaseEntry&) = default;
};

struct DurableState {
  // Starts of memd that adopted this state, counting the first: a start
  // that adopts writes generation + 1.
  std::uint64_t generation = 0;
  std::map<std::uint64_t, SegmentEntry> segments;
  std::map<std::uint64_t, BufferEntry> buffers;
  std::map<std::uint64_t, SessionEntry> sessions;
  std::map<std::uint64_t, LeaseEntry> leases;

  friend bool operator==(const DurableState&, const DurableState&) = default;
};

struct DropSegment {
  std::uint64_t id = 0;
  friend bool operator==(const DropSegment&, const DropSegment&) = default;
};
// Also drops every lease on the buffer: memd frees a buffer only once its
// leases ended, but the state never holds a lease on no buffer.
struct DropBuffer {
  std::uint64_t id = 0;
  friend bool operator==(const DropBuffer&, const DropBuffer&) = default;
};
struct SetGeneration {
  std::uint64_t generation = 0;
  friend bool operator==(const SetGeneration&, const SetGeneration&) = default;
};
// Also drops every lease of the session.
struct DropSession {
  std::uint64_t id = 0;
  friend bool operator==(const DropSession&, const DropSession&) = default;
};
struct DropLease {
  std::uint64_t id = 0;
  friend bool operator==(const DropLease&, const DropLease&) = default;
};

// One change to the state: an entry put (added or replaced by id) or
// dropped. A batch of changes is one atomic update of the state file.
using Change = std::variant<SegmentEntry, DropSegment, BufferEntry, DropBuffer, SetGeneration,
                            SessionEntry, DropSession, LeaseEntry, DropLease>;

// Applies `change` to `state`. Dropping an id that is not there is a no-op.
// A put, and a drop of a segment or a lease, is one map operation (log n).
// DropSession scans every lease (sessions end rarely); so does DropBuffer
// unless the state holds no lease at all: IndexedState does without that
// scan, for what applies a change per free.
void Apply(const Change& change, DurableState& state);

/// A DurableState changed only through Apply, kept with the leases of each
/// buffer so that DropBuffer needs no scan of every lease (about 80 us among
/// 10000 leases, on every free): what the journal's mirror and the loader
/// apply changes to. Not thread-safe.
class IndexedState {
 public:
  // Indexes the leases of `state`: leases x log leases.
  explicit IndexedState(DurableState state = {});

  // As durable::Apply(change, state()) does. Each change costs a few map
  // operations (log n), except DropBuffer, log n per lease on the buffer,
  // and DropSession, which still scans every lease.
  void Apply(const Change& change);

  const DurableState& state() const { return state_; }
  // The state, given up: this object is left empty.
  DurableState Take() &&;

 private:
  DurableState state_;
  // (buffer id, lease id) of each lease in state_.
  std::set<std::pair<std::uint64_t, std::uint64_t>> leases_by_buffer_;
};

// Whether `state` is one memd could have written: every buffer in a segment
// of its location and domain, inside it and overlapping no other, sizes and
// ids non-zero, names valid and unique among linked buffers, attributes and
// modes valid; every session's token digest kTokenDigestBytes long; every
// lease of a session and on a buffer of the state; every id non-zero and
// its entry's key. Errors: DATA_LOSS naming the first entry that is not.
absl::Status Validate(const DurableState& state);

// The names descriptors are stored under in the service manager's store
// (FDNAME: printable ASCII, no ':').
std::string SegmentFdName(std::uint64_t segment_id);   // "memd.segment.<id>"
std::string StateFdName(std::uint64_t epoch);          // "memd.state.<epoch>"

}  // namespace memd::durable
