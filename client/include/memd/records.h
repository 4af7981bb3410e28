#pragma once

// libmemd's records: what the daemon reports of buffers, pools, devices,
// sessions, transfers and leaks (Client::Stat, List, Stats, Usage, Leaks,
// Advise, Transfer::Progress). Plain structs; memd/client.h includes this.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace memd {

enum class BufferState { kCreating, kSealed };
enum class Persistence { kPersistent, kEphemeral };
enum class Access { kRead, kReadWrite };

// One copy of a buffer (BufferInfo::replicas): where, and how current.
struct ReplicaInfo {
  std::string location;  // "host", "pinned", "device:N".
  // "current" (holds the buffer's generation; may be leased), "stale" (an
  // older one, kept for those who hold it), "filling" (a copy into it runs).
  std::string state;
  std::uint64_t generation = 0;
  std::uint32_t readers = 0;
  std::uint32_t writers = 0;
  std::uint64_t bytes = 0;  // What it takes where it lives,
  uid_t charged_uid = 0;    // charged to this uid.
};

// What the daemon counted of one buffer's use since it was created or the
// daemon started (Stat and List only; empty elsewhere).
struct BufferUsage {
  // Leases granted by location ("host", "device:0", ...; "other" past the
  // daemon's per-buffer cap) and by uid ((uid_t)-1 counts every uid past
  // the cap of 32 named ones).
  std::map<std::string, std::uint64_t> opens_by_location = {};
  std::map<uid_t, std::uint64_t> opens_by_uid = {};
  // Copies into replicas (made, or brought up to date), and the bytes they
  // moved by direction ("host_to_device", "device_to_host",
  // "device_to_device", "host_to_host").
  std::uint64_t lazy_copies = 0;
  std::map<std::string, std::uint64_t> bytes_copied = {};
  // Opens away from the home served by a replica that was there already.
  std::uint64_t copies_avoided = 0;
  // Unset: never opened since the daemon started.
  std::optional<absl::Time> last_used;
};

// One session's leases on a buffer at one location with one access
// (BufferInfo::holders).
struct LeaseHolder {
  std::uint64_t session_id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  std::string command;   // The process name the daemon read at connect.
  std::string location;  // The copy the leases map: home or replica.
  Access access = Access::kRead;
  std::uint32_t leases = 0;
  absl::Time since;  // When the oldest of them was granted.
};

// Who holds a buffer's leases, as far as this user may know (Stat only):
// the sessions of this user's uid in full (every uid's for root), other
// users' leases only counted.
struct LeaseHolders {
  std::vector<LeaseHolder> listed = {};  // Oldest first, at most 64.
  std::uint32_t unlisted_leases = 0;     // Of visible holders past the 64.
  std::uint32_t other_users_leases = 0;
};

// What the daemon says about a buffer.
struct BufferInfo {
  std::string name;
  std::uint64_t id = 0;  // Unique for the daemon's lifetime.
  std::uint64_t size = 0;
  std::string location;  // "host", "pinned", "device:N".
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  std::uint32_t mode = 0600;
  BufferState state = BufferState::kCreating;
  Persistence persistence = Persistence::kPersistent;
  std::uint32_t lease_count = 0;
  bool unlinked = false;
  absl::Time created;
  std::optional<absl::Time> sealed;
  pid_t creator_pid = 0;
  // Set at Create (CreateOptions::attrs), sorted by key.
  std::map<std::string, std::string> attrs = {};
  // Stat and List: every copy (host, pinned, then devices), the buffer's
  // state in unified-memory words ("host_only", "device_only",
  // "synchronized", "host_dirty", "device_dirty", "mixed"), its content's
  // generation, and the last copy that failed ("" none). `location` is the
  // home; in a Buffer's info, where that lease's copy lives.
  std::vector<ReplicaInfo> replicas = {};
  std::string sync_state = {};
  std::uint64_t generation = 0;
  std::string fill_failure = {};
  BufferUsage usage = {};
  // Location "auto": which rule chose `location`, with its numbers ("8 MiB
  // is in 64 KiB-16 MiB: device; device:1 has the most free (12 GiB of 16
  // GiB)"). Empty for a named location, and after memd restarted.
  std::string placement = {};
  // What memd may take back when its location is full: "pinned",
  // "demotable" or "evictable" (CreateOptions::retention).
  std::string retention = {};
  // The NUMA node its pages were bound to (CreateOptions::numa); -1 when
  // they were not (numa off, a machine of one node, device memory).
  int numa_node = -1;
  // Stat only: who holds its leases (empty elsewhere).
  LeaseHolders holders = {};
};

// One piece of advice (Client::Advise), with the numbers behind it.
struct Recommendation {
  // A buffer name, or a prefix ending in "/" for a group of buffers.
  std::string subject;
  // "prefetch", "move", "drop_replica", "unlink".
  std::string action;
  // Where to copy to (prefetch, move) or where memory would be freed
  // (drop_replica, unlink).
  std::vector<std::string> locations;
  // "opened 412 times on device:0 and device:1, lives on host, 96 GiB
  // copied in the last hour".
  std::string evidence;
  // Bytes it would copy (prefetch, move) or free (drop_replica, unlink).
  std::uint64_t bytes = 0;
};

// One entry of the leak report (Client::Leaks), with the numbers behind it.
struct Leak {
  // Whose: the buffer's owner, the lease's or session's holder.
  std::uint32_t uid = 0;
  // "never_opened" (a persistent sealed buffer nobody opened since it was
  // created), "unsealed_idle" (still not sealed), "idle_lease" (held that
  // long), "many_leases" (a session holding at least many_leases).
  std::string kind;
  // A buffer name, "lease N on NAME", "session N (command)".
  std::string subject;
  // What the buffer takes in the pools, every copy counted; for a lease the
  // memory it maps; 0 for many_leases.
  std::uint64_t bytes = 0;
  // Since the buffer was created or the lease granted; 0 for many_leases.
  absl::Duration age = absl::ZeroDuration();
  // The buffer's creator or the holder; 0 where memd does not know it.
  std::uint32_t pid = 0;
  // "4 KiB, sealed, never opened in 3 hours since it was created, pid 42".
  std::string evidence;
};

struct LeakReport {
  // By uid, then kind (in the order above), then oldest first; at most
  // 4096 of them.
  std::vector<Leak> leaks;
  std::uint64_t omitted = 0;  // How many more the daemon did not send.
};

struct SizeClassStats {
  std::uint64_t bytes = 0;        // Block size of the class.
  std::uint64_t allocations = 0;  // Served since start.
  std::uint64_t cached = 0;       // Freed blocks held for reuse now.
};

struct PoolStats {
  std::string location;
  std::uint64_t reserved_bytes = 0;  // Held from the system, used or not.
  std::uint64_t used_bytes = 0;      // In live buffers.
  std::uint64_t free_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_used_bytes = 0;
  std::uint64_t hit_count = 0;   // Served without a new system allocation.
  std::uint64_t miss_count = 0;
  std::uint64_t largest_free_block_bytes = 0;
  double fragmentation = 0;  // 1 - largest free block / free bytes.
  std::uint64_t segments = 0;
  std::uint64_t scrubbed_bytes = 0;
  std::uint64_t trimmed_bytes = 0;
  std::uint64_t limit_bytes = 0;
  std::vector<SizeClassStats> size_classes;
  // What memory pressure and quotas took back here since start: buffers
  // evicted, copies demoted (their home kept), and their bytes.
  std::uint64_t evictions = 0;
  std::uint64_t evicted_bytes = 0;
  std::uint64_t demotions = 0;
  std::uint64_t demoted_bytes = 0;
};

// What Client::Trim gave back, per location.
struct TrimmedPool {
  std::string location;
  std::uint64_t released_bytes = 0;
  // A GPU pool whose driver reports free memory: how much the driver's free
  // memory rose across the trim. Less than released_bytes while clients'
  // imports hold what memd gave back (or another process allocated
  // meanwhile). Unset elsewhere.
  std::optional<std::uint64_t> driver_freed_bytes;
};

// A GPU the daemon serves.
struct DeviceInfo {
  int ordinal = 0;  // "device:N": CUDA GPUs first, then Level Zero ones.
  // "GPU-xxxxxxxx-...", as nvidia-smi prints it; "ZE-xxxxxxxx-..." for a
  // Level Zero device.
  std::string uuid;
  std::string name;
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  bool vmm = false;       // Supports virtual memory management.
  bool posix_fd = false;  // Can export VMM memory as POSIX fds.
  // How memd hands out its memory: "vmm_fd" or "ipc" (CUDA),
  // "level_zero_ipc".
  std::string handle_type;
  // False once a sticky driver error broke the GPU's context for memd (its
  // transfers fail until the daemon restarts); health_error says which.
  bool healthy = true;
  std::string health_error;
  std::string api;          // "cuda" or "level_zero".
  std::string pci_address;  // "dddd:bb:dd.f"; empty where the driver cannot say.
  bool ipc = false;         // Level Zero: the driver shares memory across processes.
  // The driver answered a free-memory query: free_bytes and
  // outside_memd_bytes mean something (CUDA; not Level Zero 1.4).
  bool has_free = false;
  // What memd's pool holds of the device: buffers, replicas, idle segments.
  std::uint64_t memd_bytes = 0;
  // What the driver counts used beyond memd's pool: other processes, the
  // drivers' contexts (memd's own too), and memory memd gave back that
  // clients' imports still hold.
  std::uint64_t outside_memd_bytes = 0;
};

// What the transfer engine did since the daemon started, and holds now.
struct TransferStats {
  std::uint64_t active = 0;        // Unfinished transfers, now.
  std::uint64_t active_bytes = 0;  // Their bytes (what admission counts).
  std::uint64_t completed = 0;     // Finished successfully.
  std::uint64_t bytes = 0;         // Moved by finished chunks.
  std::uint64_t failed = 0;        // Ended with an error or cancelled.
  std::uint64_t retries = 0;       // Chunks tried again after a transient error.
  std::uint64_t rejected = 0;      // Refused by admission (RESOURCE_EXHAUSTED).
};

// Whether buffers outlive the daemon, and what its start took back from the
// daemon before it (after a crash, kill -9 or restart).
struct DurabilityStats {
  bool recording = false;     // Persistent buffers will outlive this daemon.
  std::string not_recording;  // Why not, when not; empty while recording.
  // 1 for a daemon that started from nothing, the previous one's plus one
  // for one that took its buffers back; 0 from a daemon too old to say.
  std::uint64_t generation = 0;
  bool recovered = false;  // It took a previous daemon's state back:
  absl::Time recovered_at;  // then (else the Unix epoch),
  absl::Duration recovery;  // in this long,
  std::uint64_t adopted_segments = 0;
  std::uint64_t adopted_buffers = 0;
  std::uint64_t adopted_bytes = 0;  // Of the adopted buffers' allocations.
  std::uint64_t lost_buffers = 0;   // Recorded, but their memory was gone.
  // Segments stored that did not come back: all when the previous state
  // could not be read (its buffers unknown), else the lost buffers'.
  std::uint64_t lost_segments = 0;
  // The grace period after the recovery is on (recovery_grace_seconds):
  // leases may still be re-claimed, and buffers waiting for their holders
  // stay until it ends, even once unlinked; how many wait, and how many
  // leases may be re-claimed. False and 0 from a daemon too old to say.
  bool in_grace = false;
  std::uint64_t awaiting_holders = 0;
  std::uint64_t reclaimable_leases = 0;
};

// Creates waiting for memory at one location (DaemonStats::memory_waits).
struct MemoryWaits {
  std::string location;
  std::uint64_t calls = 0;  // Creates, OpenOrCreates and copies waiting there.
  std::uint64_t bytes = 0;  // What they ask for together.
};

struct DaemonStats {
  std::string version;
  std::string backend;
  std::vector<PoolStats> pools;
  std::uint64_t buffers = 0;
  std::uint64_t sessions = 0;
  std::uint64_t leases = 0;
  std::string metrics_address;  // HOST:PORT, empty when off.
  absl::Time started;
  std::vector<DeviceInfo> devices;  // Empty without a GPU backend.
  // Calls waiting now: opens (for a seal), creates (for memory), WaitTransfer.
  std::uint64_t waits = 0;
  TransferStats transfers;
  // True for root: buffers, sessions, leases, waits and transfers are the
  // whole daemon's; else the caller's uid's (the transfer counters since
  // start then 0). Pools and devices are the node's either way.
  bool daemon_wide = false;
  DurabilityStats durability;  // The node's, for every caller.
  // Among waits, calls waiting for memory (creates, copies), by location; only locations
  // where some wait (of the caller's uid alone unless daemon_wide).
  std::vector<MemoryWaits> memory_waits;
};

struct SessionInfo {
  std::uint64_t id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string command;
  std::uint32_t lease_count = 0;
  absl::Time started;
  std::uint64_t created_bytes = 0;  // Memory of live buffers it created.
};

// What one uid's live buffers take at one location (Client::Usage).
struct UidUsage {
  uid_t uid = 0;
  std::string location;
  std::uint64_t bytes = 0;  // What the buffers take (as the quota counts).
  std::uint64_t buffers = 0;
  std::uint64_t quota_bytes = 0;  // The uid quota there; 0: none.
};

// Copies (Client::Copy) are served at chunk boundaries, critical before
// normal before background; a waiting copy rises a class as it ages.
enum class Priority { kCritical, kNormal, kBackground };
enum class TransferState { kQueued, kRunning, kDone, kFailed, kCancelled };

struct TransferProgress {
  std::uint64_t id = 0;
  TransferState state = TransferState::kQueued;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  // "h2h", "h2d", "d2h" or "d2d".
  std::string direction;
  // How the bytes moved: "cpu" (host to host), "staged" (pageable host
  // memory through the daemon's pinned staging ring), "direct" (pinned host
  // memory, no staging), "device" (one GPU), "peer_staged" (between GPUs,
  // through the staging ring); empty before the first chunk.
  std::string path;
  int device = -1;  // memd's ordinal of the GPU moving it; -1 host to host.
  std::uint32_t retries = 0;
  // What ended a failed or cancelled transfer; OK otherwise.
  absl::Status status;
  // From the first chunk to the end (or to now while running).
  absl::Duration elapsed;

  bool finished() const {
    return state == TransferState::kDone || state == TransferState::kFailed ||
           state == TransferState::kCancelled;
  }
};

// A copy queued or running now, and whose it is (Client::Transfers).
struct TransferInfo {
  TransferProgress progress;  // state kQueued or kRunning.
  Priority priority = Priority::kNormal;
  // The buffers it reads and writes, by name as they were when it started,
  // the location of the copy of each ("host", "pinned", "device:N"; a
  // replica fill reads and writes one name), and where its range starts.
  std::string source_name;
  std::string source_location;
  std::uint64_t source_offset = 0;
  std::string destination_name;
  std::string destination_location;
  std::uint64_t destination_offset = 0;
  absl::Duration age;  // Since it was asked for.
  // The session that started it, and its process (pid 0 and no command
  // once the session has ended).
  std::uint64_t session_id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  std::string command;
};

struct TransferList {
  // This user's (every user's for root), oldest first; at most 1000.
  std::vector<TransferInfo> transfers;
  std::uint64_t omitted = 0;  // How many more the daemon did not send.
};

}  // namespace memd
