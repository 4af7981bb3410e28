#pragma once

// libmemd's options: what a call may ask for beyond its arguments (Connect,
// Create, Open, Prefetch, Copy, Leaks, List). Plain structs with sensible
// defaults; memd/client.h includes this.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "memd/records.h"

namespace memd {

class Buffer;

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

// What Client::List lists beyond the named buffers.
struct ListOptions {
  // Also buffers of matching names that were unlinked but still take
  // memory (BufferInfo::unlinked: leased, or held by copies in flight or a
  // restart's grace period), and copies an unlink left leased, each a row
  // of its own after the named buffer of its name: a name may then appear
  // more than once. An older daemon ignores it and lists none.
  bool include_unlinked = false;
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
  // Host and pinned buffers: keep the buffer's descriptor open for
  // Buffer::WriteFromFile (one descriptor more in this process until the
  // Buffer is released). Ignored for device buffers, whose WriteFromFile
  // needs none.
  bool keep_descriptor = false;
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
  // As CreateOptions::keep_descriptor, for a kReadWrite open.
  bool keep_descriptor = false;
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

struct ConnectOptions {
  // Exactly this directory, when set. Empty: $MEMD_SOCKET_DIR exactly, when
  // set; else the user's own daemon's ($XDG_RUNTIME_DIR/memd, else
  // /tmp/memd-$UID; /run/memd for root), then /run/memd (the system
  // service's), passing over only a directory with no daemon in it.
  // UNAVAILABLE names each directory tried.
  std::string socket_dir;
  // Upper bound on each call that does not wait for a seal.
  absl::Duration call_timeout = absl::Seconds(30);
  // Read-only mappings stay after their last Buffer is released, most
  // recently used first, up to this many bytes: opening the same buffer
  // again then needs no new descriptor and no mmap. 0 unmaps at once.
  std::uint64_t mapping_cache_bytes = std::uint64_t{256} << 20;
  // The same for device buffers: the import of a read-only lease (CUDA)
  // stays after its last Buffer is released, up to this many bytes of
  // buffers, so that opening the buffer again needs no descriptor and no
  // import call. While memd keeps the buffer this costs no device memory
  // (the memory is memd's); memd tells this process when it frees the
  // buffer, and the import goes then. 0 keeps none.
  std::uint64_t device_cache_bytes = std::uint64_t{16} << 30;
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

}  // namespace memd
