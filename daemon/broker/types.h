#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/attrs.h"
#include "common/location.h"
#include "common/unique_fd.h"
#include "daemon/broker/leaks.h"
#include "daemon/broker/numa_placement.h"
#include "daemon/broker/placement.h"
#include "daemon/broker/quota.h"
#include "daemon/broker/replica_set.h"
#include "daemon/broker/retention.h"
#include "daemon/broker/usage_tracker.h"
#include "daemon/pool/pool.h"

namespace memd::broker {

using SessionId = std::uint64_t;
using LeaseId = std::uint64_t;
using BufferId = std::uint64_t;
using WatchId = std::uint64_t;
using pool::Access;

enum class BufferState { kCreating, kSealed };
enum class Persistence { kPersistent, kEphemeral };

inline constexpr std::uint32_t kDefaultMode = 0600;

// One copy of a buffer as Stat shows it: its state and what it takes.
struct ReplicaInfo {
  ReplicaReport report;
  std::uint64_t bytes = 0;  // What its allocation takes where it lives,
  uid_t charged_uid = 0;    // charged to this uid.
};

// One session's leases on a buffer at one of its locations with one
// access, as Stat shows them (LeaseHolders).
struct LeaseHolder {
  SessionId session = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  std::string command;  // The holder's process name (SessionInfo::command).
  Location location;    // The copy they map: the home or a replica.
  Access access = Access::kRead;
  std::uint32_t leases = 0;
  absl::Time since;  // When the oldest of them was granted.
};

// The most holders one Stat lists (LeaseHolders::listed): a reply stays
// small however many sessions hold a buffer.
inline constexpr std::size_t kMaxListedHolders = 64;

// Who holds a buffer's leases, as far as the caller may know: the sessions
// of its own uid in full (every uid's for root), others' leases only
// counted (docs/security.md, "What a client learns of others"). Stat only.
struct LeaseHolders {
  // Oldest first, at most kMaxListedHolders.
  std::vector<LeaseHolder> listed = {};
  // Leases of holders the caller could see that did not fit the list.
  std::uint32_t unlisted_leases = 0;
  // Leases of other uids' sessions (0 for root, who sees them all).
  std::uint32_t other_users_leases = 0;
};

// What anyone allowed to see a buffer may know about it.
struct BufferInfo {
  std::string name;
  BufferId id = 0;
  std::uint64_t size = 0;
  Location location;
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  std::uint32_t mode = kDefaultMode;
  BufferState state = BufferState::kCreating;
  Persistence persistence = Persistence::kPersistent;
  std::uint32_t lease_count = 0;
  bool unlinked = false;
  absl::Time created;
  std::optional<absl::Time> sealed;
  pid_t creator_pid = 0;
  BufferAttrs attrs = {};
  Retention retention = Retention::kPinned;
  // The NUMA node its pages were bound to (its pool domain's), -1 when not
  // bound (numa off, one node, device memory, a copy away from home).
  int numa_node = -1;
  // Views only (Stat, List, Prefetch, DropReplica, Sync): every copy, the
  // buffer's sync state and generation, and the last fill that failed.
  std::vector<ReplicaInfo> replicas = {};
  std::string sync_state = {};
  Generation generation = 0;
  std::string fill_failure = {};
  BufferUsage usage = {};  // What memd counted of its use (UsageTracker).
  // Which rule of automatic placement chose `location`, with its numbers
  // (PlacementDecision::rule); empty when the creator named the location.
  // Not journaled: a buffer adopted after a restart has none.
  std::string placement = {};
  // Stat only: who holds its leases, at every copy (LeaseHolders).
  LeaseHolders holders = {};
};

struct CreateParams {
  std::string name;
  std::uint64_t size = 0;
  Location location;
  std::uint32_t mode = kDefaultMode;
  Persistence persistence = Persistence::kPersistent;
  BufferAttrs attrs = {};
  Retention retention = Retention::kPinned;
  // NUMA placement asked for (host and pinned only): the broker binds the
  // pages to the node NumaPlacement::Choose says.
  NumaRequest numa = {};
  // OpenOrCreate only: when the name exists, the uid that must own it (as
  // OpenParams::expected_owner). What a call creates is the caller's.
  std::optional<uid_t> expected_owner = std::nullopt;
  // OpenOrCreate with a wake: whether an existing unsealed buffer is waited
  // for (as OpenParams::wait_for_seal). False (a call that waits only for
  // memory): FAILED_PRECONDITION at once, as without a wake.
  bool wait_for_seal = true;
  // `location = auto`: the broker chooses `location` (Place, placement.h)
  // among the pools in `mappable` (empty: host and pinned, the memory every
  // process can map) from the size, `hint` and each one's free memory, and
  // writes the rule that chose it in `placement` (Broker::ResolvePlacement).
  // OpenOrCreate opens an existing buffer of the name wherever it lives.
  bool auto_location = false;
  AccessHint hint = AccessHint::kNone;
  std::vector<Location> mappable = {};
  std::string placement = {};  // Set by ResolvePlacement only.
};

struct OpenParams {
  std::string name;
  Access access = Access::kRead;
  // The uid that must own the buffer: names are claimed by whoever creates
  // them first, so a consumer that waits for one producer says which.
  // Another owner is PERMISSION_DENIED (after the read check).
  std::optional<uid_t> expected_owner = std::nullopt;
  // Where to lease it; unset: its home. A location without a current copy
  // gets one (a fill), which the open waits for: only with a wake.
  std::optional<Location> location = std::nullopt;
  // False: make the copy at `location` current and grant nothing (Prefetch:
  // the grant that comes back has lease 0 and only the buffer's info).
  bool lease = true;
  // With a wake: whether a missing or unsealed buffer is waited for. False
  // (an open without a wait timeout that waits only for a fill): NOT_FOUND
  // and FAILED_PRECONDITION at once, as without a wake.
  bool wait_for_seal = true;
  // A device buffer granted to this open is one the session hears of when
  // memd frees it (Broker::SetFreedNotice): its client keeps its import.
  bool notify_freed = false;
};

// A lease the broker granted, with a descriptor for the caller to pass on.
struct Grant {
  LeaseId lease = 0;
  Access access = Access::kRead;
  BufferInfo buffer;
  bool created = false;  // OpenOrCreate: this call created the buffer.
  // What to send: a descriptor owned by `segment` (which the grant keeps
  // alive until it is sent even if the lease ends meanwhile), or bytes.
  pool::SegmentHold segment;
  pool::ExportedHandle handle;
  // The exported memory as a whole: device clients map all of it (CUDA
  // maps allocations only from their start) and cache it by id.
  std::uint64_t segment_id = 0;
  std::uint64_t segment_bytes = 0;
  std::uint64_t offset = 0;        // Of the buffer inside the exported memory.
  std::uint64_t mapped_bytes = 0;  // How much of it the lease may map.
};

struct SessionInfo {
  SessionId id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string command;
  std::uint32_t lease_count = 0;
  absl::Time started;
  // Bytes of live buffers this session created, all locations together
  // (what max_session_bytes counts, per location).
  std::uint64_t created_bytes = 0;
};

// What one uid's live buffers take at one location, against its quota.
struct UidUsage {
  uid_t uid = 0;
  Location location;
  std::uint64_t bytes = 0;
  std::uint64_t buffers = 0;
  std::uint64_t quota_bytes = 0;  // max_uid_bytes there; 0: none.
};

// Requests refused because a limit (BrokerLimits) was reached, since start.
struct LimitRejections {
  std::uint64_t buffers = 0;
  std::uint64_t sessions = 0;
  std::uint64_t leases_per_session = 0;
  std::uint64_t waits_per_session = 0;
  std::uint64_t sessions_per_uid = 0;
  std::uint64_t buffers_per_uid = 0;
  std::uint64_t leases_per_uid = 0;
  std::uint64_t waits_per_uid = 0;
  std::uint64_t waits = 0;
  // Byte quotas, by (quota key, location): {"max_uid_bytes", "host"} -> n.
  std::map<std::pair<std::string, std::string>, std::uint64_t> quotas;
};

// What memory pressure took back at one location since start
// (Broker::MakeRoomLocked): buffers evicted and copies demoted, and the
// bytes each gave back.
struct PressureCounts {
  std::uint64_t evictions = 0;
  std::uint64_t evicted_bytes = 0;
  std::uint64_t demotions = 0;
  std::uint64_t demoted_bytes = 0;
};

// Calls waiting for memory at one location (creates, OpenOrCreates, copies):
// how many, and the bytes they ask for together.
struct MemoryWaits {
  std::uint64_t calls = 0;  // Creates, OpenOrCreates and copies.
  std::uint64_t bytes = 0;
};

// The grace period after a recovery (Broker::EndGrace): whether it is on,
// the adopted buffers that wait in it for their holders, and the leases of
// earlier sessions that may still be re-claimed.
struct GraceCounts {
  bool on = false;
  std::uint64_t awaiting_holders = 0;
  std::uint64_t reclaimable_leases = 0;
};

struct BrokerCounts {
  std::uint64_t buffers = 0;   // Named, or still leased or copied after unlink.
  std::uint64_t creating = 0;  // Of those: not sealed yet,
  std::uint64_t sealed = 0;    // sealed,
  std::uint64_t unlinked = 0;  // unlinked but still leased, or parked under copies.
  // Copies of named buffers away from their homes (not among `buffers`),
  // and copies orphaned by an unlink that leases or copies still hold.
  std::uint64_t replicas = 0;
  // Since start: copies made into replicas (first fills and refreshes),
  // their bytes by direction ("host_to_device", ...), and opens away from
  // a home served by a copy that was there already.
  std::uint64_t replica_copies = 0;
  std::map<std::string, std::uint64_t> replica_bytes_copied;
  std::uint64_t copies_avoided = 0;
  // Named buffers by their sync state ("host_only", ...), every state
  // present (0 when none is in it).
  std::map<std::string, std::uint64_t> by_sync_state;
  // By location name: only locations where pressure took something.
  std::map<std::string, PressureCounts> pressure;
  std::uint64_t sessions = 0;
  std::uint64_t leases = 0;
  std::uint64_t waits = 0;  // Calls waiting: opens (for a seal), creates, WaitTransfer.
  // Among them, calls waiting for memory (creates, copies), by location name
  // (MemoryQueue::ByLocation). Locations nobody waits at are absent.
  std::map<std::string, MemoryWaits> memory_waits;
  LimitRejections rejections;
};

// The broker's counts, every uid's usage and the leak totals, of one moment.
struct BrokerSnapshot {
  BrokerCounts counts;
  std::vector<UidUsage> usage;  // By uid, then location.
  // Over every uid, by the default rules (LeakRules{}): one per kind of
  // kLeakKinds, in that order.
  std::vector<LeakTotal> leaks = {};
};

// Limits that keep one client from exhausting the daemon. Exceeding one is
// RESOURCE_EXHAUSTED (sizes: INVALID_ARGUMENT) with the numbers.
struct BrokerLimits {
  std::uint64_t max_buffer_bytes = std::uint64_t{64} << 30;
  std::uint64_t max_buffers = 65536;
  std::uint64_t max_sessions = 4096;
  std::uint64_t max_leases_per_session = 65536;
  std::uint64_t max_waits_per_session = 256;
  // Per uid, root included (in containers every client may be root): what
  // all sessions of one uid may hold together, so that one user cannot
  // take what the global limits leave for everybody. Buffers count until
  // their memory is freed (as max_buffers).
  std::uint64_t max_sessions_per_uid = 256;
  std::uint64_t max_buffers_per_uid = 16384;
  std::uint64_t max_leases_per_uid = 65536;
  std::uint64_t max_waits_per_uid = 1024;
  // Opens waiting for a seal in the whole daemon.
  std::uint64_t max_waits = 16384;
  // Bytes of live buffers one uid may own, and one session may have
  // created while it lasts, in each location: what the pool sets aside for
  // each (Pool::AllocationBytes), not the size asked.
  Quota max_uid_bytes;
  Quota max_session_bytes;
};

}  // namespace memd::broker
