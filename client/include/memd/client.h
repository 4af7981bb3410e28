#pragma once

// libmemd: the client library of memd, the per-node memory broker.
//
//   auto client = memd::Client::Connect();                 // MEMD_SOCKET_DIR or default
//   auto buffer = (*client)->Create("frames/0", 1 << 20);  // persistent, mode 0600
//   std::memcpy(buffer->mutable_data().data(), src, n);
//   buffer->Seal();                                        // contents final
//   ...in another process...
//   auto frame = (*client)->Open("frames/0", {.wait = absl::Seconds(5)});
//   consume(frame->data());                                // read-only mapping
//
// Every call returns absl::Status / absl::StatusOr with the daemon's code:
// INVALID_ARGUMENT (bad name, size, mode, location), NOT_FOUND,
// ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION (wrong state, e.g.
// not sealed yet), RESOURCE_EXHAUSTED (limits, memory), UNAVAILABLE (no
// daemon), DEADLINE_EXCEEDED (a wait ran out), UNAUTHENTICATED (the session
// ended, e.g. the daemon restarted; the next call reconnects), ABORTED (a
// race with another client lost: call again).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// What Client::Leaks counts as forgotten.
struct LeaksOptions {
  // Buffers and leases younger than this are not reported; sent in whole
  // seconds, rounded up. Zero: everything, however young. Negative:
  // INVALID_ARGUMENT; beyond 3650 days the daemon refuses it too.
  absl::Duration older_than = absl::Hours(1);
  // A session holding at least this many leases is reported; 0 is the
  // daemon's default (1024).
  std::uint64_t many_leases = 1024;
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

struct CreateOptions {
  // "host", "pinned", "device:N", or "auto": memd chooses from the size,
  // `access_hint` and each location's free memory now, only among
  // `mappable_locations` (BufferInfo::placement says which rule chose).
  std::string location = "host";
  // Location "auto" only (INVALID_ARGUMENT with another): "",
  // "device_frequent", "host_frequent", "read_mostly" or "streaming".
  std::string access_hint = {};
  // Location "auto" only: where this process can map a buffer. Empty:
  // libmemd lists "host", "pinned" and "device:N" for every GPU of memd's
  // that this process's CUDA sees (one Stats call, and the CUDA driver
  // loaded if memd has GPUs); host and pinned alone without a CUDA driver.
  std::vector<std::string> mappable_locations = {};
  // Permission bits like a file's: 0600 owner only, 0640 group may read,
  // 0666 everyone may read and write.
  std::uint32_t mode = 0600;
  Persistence persistence = Persistence::kPersistent;
  // Map every page at once instead of faulting them in one by one: faster
  // when the whole buffer will be touched (pool memory is already
  // committed), slower for a large buffer touched sparsely.
  bool populate = false;
  // Small attributes the buffer carries for its readers (dtype=float16,
  // shape=4096,4096, ...): at most 16; keys of [A-Za-z0-9._-] up to 64
  // bytes, values of printable ASCII up to 256 bytes, 1 KiB in all.
  // INVALID_ARGUMENT otherwise, naming the key and the limit.
  std::map<std::string, std::string> attrs = {};
  // OpenOrCreate only: when the name exists already, the uid that must own
  // it, as OpenOptions::owner (PERMISSION_DENIED otherwise). A buffer the
  // call creates is this process's, whatever this says.
  std::optional<uid_t> existing_owner = std::nullopt;
  // What memd may take back when the location is full and nobody holds
  // the buffer (README, "When memory runs out"): "" or "pinned" nothing
  // (the default); "demotable" its copies away from home, made again on
  // the next open there; "evictable" also the whole buffer, whose name then
  // goes (an open is NOT_FOUND saying when it was evicted).
  std::string retention = {};
  // Host and pinned buffers: the NUMA node to bind the pages to before any
  // is touched (README, "NUMA placement"): "" the daemon's default (config
  // `numa`, off unless set), "off", "auto" (a pinned buffer's GPU's node,
  // else this process's), or a node number such as "1". A node the machine
  // lacks is INVALID_ARGUMENT.
  std::string numa = {};
  // How long a create whose location is full (once what may give way
  // there has) waits for memory, in turn with other waiting creates (users
  // take turns); zero fails at once with RESOURCE_EXHAUSTED. Past it:
  // DEADLINE_EXCEEDED saying what was free, what was asked and who holds
  // the location. At most 24 hours. OpenOrCreate waits for memory only when
  // it would create, and then the longer of this and its seal wait.
  absl::Duration wait_for_memory = absl::ZeroDuration();
};

struct OpenOptions {
  // kRead opens sealed buffers; kReadWrite joins a buffer still being
  // written.
  Access access = Access::kRead;
  // How long a kRead open waits for the buffer to exist and be sealed;
  // zero fails at once.
  absl::Duration wait = absl::ZeroDuration();
  // As CreateOptions::populate, when this open maps the buffer.
  bool populate = false;
  // The uid that must own the buffer: anyone who may connect can create a
  // name first, so a consumer that trusts only one producer says which.
  // A buffer owned by anyone else is PERMISSION_DENIED, also one sealed
  // while this open waits. Unset: any owner whose mode lets this user read.
  std::optional<uid_t> owner = std::nullopt;
  // Where to map it: "host", "pinned", "device:N"; empty: its home. Where
  // the buffer has no current copy the daemon makes one (through its
  // transfer engine, once for every opener there, charged to this user's
  // quota) and the open waits for it: with a zero `wait`, as long as the
  // copy takes (up to kCopyWait).
  std::string location = {};
  // With a location: when the copy finds the location full after what may
  // give way has, wait up to this long for memory there (queued with the
  // creates waiting there) instead of failing RESOURCE_EXHAUSTED; then for
  // the copy as above. The whole open waits at most the longer of this and
  // a nonzero `wait`. Zero: fail at once. Without a location:
  // INVALID_ARGUMENT (an open where the buffer is takes no memory).
  absl::Duration wait_for_memory = absl::ZeroDuration();
};

// How long an open at a location, or a Prefetch that waits, waits for the
// copy when no wait was given.
inline constexpr absl::Duration kCopyWait = absl::Minutes(10);

struct PrefetchOptions {
  // Zero: start the copy and return at once (BufferInfo shows it
  // "filling"); else wait up to this long for it to be current.
  absl::Duration wait = absl::ZeroDuration();
  // As OpenOptions::owner.
  std::optional<uid_t> owner = std::nullopt;
  // As OpenOptions::wait_for_memory: a copy at a full location waits up to
  // this long for memory; the call then waits for the copy too (with a
  // zero `wait`, as long as it takes, up to kCopyWait), at most the longer
  // of this and a nonzero `wait`.
  absl::Duration wait_for_memory = absl::ZeroDuration();
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

struct ConnectOptions {
  // Empty: $MEMD_SOCKET_DIR, else /run/memd for root, else
  // $XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID.
  std::string socket_dir;
  // Upper bound on each call that does not wait for a seal.
  absl::Duration call_timeout = absl::Seconds(30);
  // Read-only mappings stay after their last Buffer is released, most
  // recently used first, up to this many bytes: opening the same buffer
  // again then needs no new descriptor and no mmap. 0 unmaps at once.
  std::uint64_t mapping_cache_bytes = std::uint64_t{256} << 20;
  // Before sending anything, Connect checks whom it talks to, and refuses
  // with PERMISSION_DENIED a socket directory others may write or that an
  // untrusted user owns (or one of the directories above it), and a daemon
  // running as an untrusted uid. Trusted: root, this process's effective
  // uid, the owner of a socket directory that root made (its parent is
  // root's and writable by root alone, as a systemd RuntimeDirectory in
  // /run), and this uid. Unset: $MEMD_DAEMON_UID when set.
  std::optional<uid_t> daemon_uid = std::nullopt;
  // Level Zero buffers are opened in this ze_context_handle_t (passed as a
  // void*, so that this header needs no Level Zero header): give the
  // context your program uses them in, on the driver of the buffers' GPUs,
  // since a device pointer is valid only in the context that opened it.
  // Unset: libmemd loads the Level Zero loader on the first such buffer and
  // opens it in a context of its own on the GPU's driver
  // (Client::LevelZeroContext returns it). It must outlive the Client and
  // its Buffers.
  void* level_zero_context = nullptr;
};

namespace internal {
class ClientCore;
struct Mapping;
struct DeviceImport;
struct LeaseTicket;
}  // namespace internal

// A GPU virtual address in this process: CUDA's CUdeviceptr, or a Level
// Zero device pointer (a void*) as an integer.
using DevicePointer = std::uint64_t;

class Buffer;

// Copies (Client::Copy) are served at chunk boundaries, critical before
// normal before background; a waiting copy rises a class as it ages.
enum class Priority { kCritical, kNormal, kBackground };
enum class TransferState { kQueued, kRunning, kDone, kFailed, kCancelled };

// Bytes of a buffer this process holds a lease on (writable for a copy's
// destination). The Buffer must outlive the Copy call, not the transfer.
struct Region {
  const Buffer* buffer = nullptr;
  std::uint64_t offset = 0;
  // Bytes from offset; unset: to the end of the buffer.
  std::optional<std::uint64_t> length = std::nullopt;
};

struct CopyOptions {
  Priority priority = Priority::kNormal;
  // The transfer fails with DEADLINE_EXCEEDED unless done by then.
  std::optional<absl::Time> deadline = std::nullopt;
  // Bytes per chunk: 0 for the daemon's default (4 MiB), else 1 MiB up to
  // the daemon's staging slot size (16 MiB by default).
  std::uint64_t chunk_bytes = 0;
};

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

/// A copy the daemon runs (Client::Copy). The daemon moves the bytes whether
/// or not anyone waits; destroying the handle leaves the copy running.
/// Move-only. Not thread-safe. The daemon forgets a session's transfers
/// when the session ends and keeps its last 64 finished ones.
class Transfer {
 public:
  Transfer();
  Transfer(Transfer&&) noexcept;
  Transfer& operator=(Transfer&&) noexcept;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer();

  std::uint64_t id() const { return id_; }
  explicit operator bool() const { return core_ != nullptr; }

  // Waits until the transfer ends or `deadline` passes, and returns how it
  // ended: OK, CANCELLED, DEADLINE_EXCEEDED (its own deadline, or no chunk
  // finished for the daemon's stall timeout), the driver's error naming the
  // chunk, call and CUresult. When this wait runs out first, it returns
  // DEADLINE_EXCEEDED and the copy goes on (Progress() is not finished()).
  absl::Status Wait(absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<TransferProgress> Progress();
  // Stops at the next chunk boundary (chunks on the GPU finish first); Wait
  // then returns CANCELLED. Cancelling a finished copy changes nothing.
  absl::Status Cancel();

 private:
  friend class internal::ClientCore;
  std::shared_ptr<internal::ClientCore> core_;
  std::uint64_t id_ = 0;
  std::uint64_t session_generation_ = 0;
};

/// A lease on a named buffer and its mapping into this process. Releasing
/// (explicitly or on destruction) ends the lease; the mapping is shared by
/// every Buffer of this process on the same memory and unmapped with the
/// last of them (read-only ones may stay cached: ConnectOptions). Move-only. Not thread-safe (use one Buffer per thread, or
/// guard it); Buffers on different threads are independent. A Buffer may
/// outlive its Client.
class Buffer {
 public:
  Buffer();
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();  // Releases; errors are dropped (use Release() to see them).

  // The buffer's bytes (info().size of them), mapped read-only for kRead.
  // Empty for device buffers: see device_pointer().
  std::span<const std::byte> data() const;
  // The same bytes, writable; empty for a read-only lease.
  std::span<std::byte> mutable_data();

  // Device buffers (location "device:N"): where the buffer starts in this
  // process's GPU address space, else 0. CUDA: a CUdeviceptr valid in the
  // context current on the thread that opened (or created) the buffer, which
  // must be on device() (else FAILED_PRECONDITION); where none was current,
  // in device()'s primary context (the CUDA runtime's, so PyTorch's and
  // CuPy's), which libmemd retains while the pointer is valid and does not
  // leave current. Read-only leases map it read-only. Level Zero: a
  // device pointer (void*) valid in the Level Zero context the buffer was
  // opened in (ConnectOptions::level_zero_context); Level Zero cannot open
  // memory read-only, so a read lease is read-only by contract only.
  DevicePointer device_pointer() const { return device_pointer_; }
  // This process's number for the buffer's GPU, or -1 for host memory: its
  // CUDA ordinal, or for a Level Zero buffer (level_zero()) its index among
  // the Level Zero GPUs this process sees (drivers in zeDriverGet order,
  // then their devices). It is N of "device:N" only where this process sees
  // the GPUs memd sees, in the same order (see Client::CudaDevice).
  int device() const { return device_import_ != nullptr ? device_ordinal() : -1; }
  // Whether the buffer lives on a Level Zero GPU (else CUDA or host).
  bool level_zero() const;

  // As of the call that granted the lease (and Seal()); Stat() is fresh.
  const BufferInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  std::uint64_t size() const { return info_.size; }
  Access access() const { return access_; }
  bool writable() const { return access_ == Access::kReadWrite; }
  // OpenOrCreate: whether this call created the buffer.
  bool created() const { return created_; }
  std::uint64_t lease_id() const { return lease_; }
  explicit operator bool() const { return core_ != nullptr; }

  // Makes the contents final and wakes waiting readers. Needs a kReadWrite
  // lease. Errors: FAILED_PRECONDITION (read-only lease, sealed already,
  // unlinked), NOT_FOUND (lease gone, e.g. after a daemon restart that did
  // not hand it back: see Client).
  absl::Status Seal();

  // Publishes what this writer wrote to the buffer's other copies: this
  // lease's copy becomes the buffer's new generation; the others are
  // refreshed now, or when next opened if someone holds them. Returns the
  // buffer. Errors: FAILED_PRECONDITION (read-only lease, sealed, unlinked),
  // NOT_FOUND (lease gone).
  absl::StatusOr<BufferInfo> Sync();

  // Ends the lease and unmaps (when no other Buffer here shares the
  // mapping). Releasing an empty or released Buffer is FAILED_PRECONDITION.
  absl::Status Release();

 private:
  friend class internal::ClientCore;

  std::shared_ptr<internal::ClientCore> core_;
  int device_ordinal() const;

  std::shared_ptr<internal::Mapping> mapping_;
  std::shared_ptr<internal::DeviceImport> device_import_;
  DevicePointer device_pointer_ = 0;
  BufferInfo info_;
  Access access_ = Access::kRead;
  std::uint64_t lease_ = 0;
  // The lease and the session holding it now: a daemon restart may hand
  // the lease on to the next session (ClientCore::ReclaimLocked).
  std::shared_ptr<internal::LeaseTicket> ticket_;
  bool created_ = false;
};

/// A connection to the local memd: a session (credentials, liveness,
/// descriptor passing) and a gRPC channel bound to it. When the process
/// exits or dies, the daemon releases every lease it held. Thread-safe.
///
/// If the daemon restarts, the Client opens a new session: at its next
/// call, or by itself as soon as the daemon is back while any of its
/// Buffers holds a lease (a thread of the Client's, started with its first
/// lease, retries from 100 ms to every 2 s; it ends with the Client and its
/// Buffers). Mappings stay valid throughout. The new session asks the
/// daemon for the leases the old one held: a daemon that kept them (memd
/// under systemd, within its recovery grace period) hands them on under the
/// same ids, and those Buffers go on as before (Seal, Release, Copy);
/// otherwise they ended with the old session, and their Seal and Copy
/// answer NOT_FOUND. A forked child must not use its parent's Client or
/// its Buffers: neither gRPC's threads nor this one survive fork.
class Client {
 public:
  // Errors: UNAVAILABLE (no daemon on the socket directory), PERMISSION_DENIED
  // (the socket's mode refuses this user; the socket directory or the daemon
  // is not one this client trusts: ConnectOptions::daemon_uid says which),
  // INVALID_ARGUMENT (MEMD_DAEMON_UID is not a number), RESOURCE_EXHAUSTED
  // (the daemon's session limit). A reconnect after a daemon restart checks
  // again.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      ConnectOptions options = {});
  ~Client();

  // Creates a buffer and returns a writable lease on it (state kCreating).
  absl::StatusOr<Buffer> Create(std::string_view name, std::uint64_t size,
                                const CreateOptions& options = {});

  absl::StatusOr<Buffer> Open(std::string_view name,
                              const OpenOptions& options = {});

  // Creates the buffer if the name is free (writable, created() true), else
  // opens it read-only, waiting up to `wait` for the seal (and, with
  // options.existing_owner, only if that uid owns it). An existing buffer
  // this user may not read is PERMISSION_DENIED whatever size was asked.
  // With options.wait_for_memory, a create at a full location waits for
  // memory as Create does; the call then waits at most the longer of the
  // two, for whichever it finds itself waiting for.
  absl::StatusOr<Buffer> OpenOrCreate(std::string_view name, std::uint64_t size,
                                      const CreateOptions& options = {},
                                      absl::Duration wait = absl::ZeroDuration());

  // Removes the name; leased memory lives until its last lease ends.
  absl::Status Unlink(std::string_view name);

  // Replicas. Prefetch makes (or refreshes) the buffer's copy at
  // `location` without a lease; DropReplica removes one nobody holds (its
  // owner, root, or the user it is charged to). Both return the buffer as
  // it is then. Errors: NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (a
  // location this node lacks), FAILED_PRECONDITION (DropReplica: the home,
  // a held, filling or only current copy), RESOURCE_EXHAUSTED (this
  // user's quota at `location`, its transfers in flight), and the copy's
  // own failure when Prefetch waits.
  absl::StatusOr<BufferInfo> Prefetch(std::string_view name, std::string_view location,
                                      const PrefetchOptions& options = {});
  absl::StatusOr<BufferInfo> DropReplica(std::string_view name, std::string_view location);

  absl::StatusOr<BufferInfo> Stat(std::string_view name);
  // Buffers this user may read, by name.
  absl::StatusOr<std::vector<BufferInfo>> List(std::string_view prefix = "");
  absl::StatusOr<DaemonStats> Stats();
  absl::StatusOr<std::vector<SessionInfo>> Sessions();
  // Bytes and buffers per uid and location, against the uid quota: this
  // user's (every user's for root), by uid then location. Bytes are what
  // the buffers take in the pools (each at least a page, or a GPU granule),
  // which is what the quota counts.
  absl::StatusOr<std::vector<UidUsage>> Usage();
  // What the daemon recommends for this user's buffers (every buffer for
  // root) whose names start with `prefix`: prefetch, move, drop_replica,
  // unlink, by subject then action (docs/design.md, "Usage and advice").
  // Empty for a quiet node. UNIMPLEMENTED from a daemon without advice.
  absl::StatusOr<std::vector<Recommendation>> Advise(std::string_view prefix = "");
  // Memory that looks forgotten (docs/design.md, "Leak report"): this
  // user's buffers, leases and sessions (every user's for root) by
  // `options`. INVALID_ARGUMENT for rules out of range; UNIMPLEMENTED from a
  // daemon without the report.
  absl::StatusOr<LeakReport> Leaks(const LeaksOptions& options = {});

  // Gives idle pool memory back to the system now: one location ("host",
  // "pinned", "device:N") or, empty, all. Root or the daemon's user only
  // (PERMISSION_DENIED); an unknown location is NOT_FOUND.
  absl::StatusOr<std::vector<TrimmedPool>> Trim(std::string_view location = "");

  // Copies `source` to `destination` (equal lengths) in the daemon: host to
  // device, device to host, device to device, host to host. Returns at once;
  // the Transfer waits, reports progress and cancels. Errors, before
  // anything moves: INVALID_ARGUMENT (an empty Region, ranges out of
  // bounds or of different lengths, chunk size), FAILED_PRECONDITION (the
  // destination lease is read-only or its buffer sealed; the GPU is
  // unhealthy), NOT_FOUND (a lease gone), RESOURCE_EXHAUSTED (this session's
  // or the daemon's bytes in flight, with the numbers).
  absl::StatusOr<Transfer> Copy(const Region& source, const Region& destination,
                                const CopyOptions& options = {});

  // One round trip to the daemon, nothing else.
  absl::Status Ping();

  // GPU numbering. memd names GPUs by its own CUDA ordinals ("device:N");
  // this process numbers them differently where CUDA_VISIBLE_DEVICES or a
  // container shows it other GPUs or another order. These translate through
  // the GPUs' UUIDs (one Stats call each): this process's CUDA device of a
  // buffer at `location` (the one a context made current before opening it
  // must be on), and the location naming this process's CUDA device
  // `cuda_device` for Create. Errors: INVALID_ARGUMENT (not "device:N"),
  // NOT_FOUND (memd serves no such GPU, or this process does not see it),
  // UNAVAILABLE (no CUDA driver in this process).
  absl::StatusOr<int> CudaDevice(std::string_view location);
  absl::StatusOr<std::string> DeviceLocation(int cuda_device);

  // The ze_context_handle_t (as a void*) that Level Zero buffers on GPU
  // `device_uuid` ("ZE-...", DeviceInfo::uuid) are opened in: the one
  // ConnectOptions gave, else libmemd's own on that GPU's driver, valid
  // while the Client lives. Errors: UNAVAILABLE (no Level Zero here),
  // FAILED_PRECONDITION (this process does not see that GPU).
  absl::StatusOr<void*> LevelZeroContext(const std::string& device_uuid);

  std::uint64_t session_id() const;
  const std::string& socket_dir() const;

 private:
  explicit Client(std::shared_ptr<internal::ClientCore> core);
  std::shared_ptr<internal::ClientCore> core_;
};

}  // namespace memd
