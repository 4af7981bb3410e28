/* memd.h: the C API of libmemd, the client library of memd (the per-node
 * memory broker). C99; every other language binds this.
 *
 *   memd_client* client = NULL;
 *   memd_error* error = NULL;
 *   if (memd_connect(NULL, &client, &error) != MEMD_OK) {
 *     fprintf(stderr, "%s\n", memd_error_message(error));
 *     memd_error_free(error);
 *     return 1;
 *   }
 *   memd_buffer* frame = NULL;
 *   memd_create(client, "frames/0", 1 << 20, NULL, &frame, &error);
 *   memcpy(memd_buffer_mutable_data(frame), src, n);
 *   memd_buffer_seal(frame, &error);
 *   memd_buffer_release(frame, NULL);
 *   memd_client_close(client);
 *
 * Errors. Every call that can fail returns a memd_code (MEMD_OK = 0) and
 * takes `memd_error** error` last. On failure, when `error` is not NULL,
 * *error receives a new error object with the code and the daemon's
 * message, which the caller frees with memd_error_free; on success *error
 * is left as it was. There is no thread-local "last error": a caller whose
 * threads change between calls (Go) loses nothing. The codes are gRPC's and
 * Abseil's (the same numbers); each call says which it returns.
 *
 * Options. Each call's options are a struct that starts with its own size;
 * fill it with its _init function (defaults, struct_size) and set what you
 * need. A program built against an older, shorter struct keeps working: the
 * fields it does not have take their defaults. NULL options: all defaults.
 *
 * Threads. A memd_client may be used from any number of threads at once. A
 * memd_buffer or a memd_transfer may not (one thread at a time); different
 * ones are independent. Buffers and transfers may outlive their client.
 *
 * Strings. A `char**` out parameter receives a new NUL-terminated UTF-8
 * string that the caller frees with memd_string_free; a `const char*`
 * return value is owned by the object it came from.
 *
 * No C++ exception ever leaves this API: one that would becomes
 * MEMD_INTERNAL (MEMD_RESOURCE_EXHAUSTED for an allocation that failed).
 */
#ifndef MEMD_MEMD_H_
#define MEMD_MEMD_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h> /* DLManagedTensor, DLDataType (Debian: libdlpack-dev) */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ---- */

/* The ABI this header describes. While the major version is 0, a new minor
 * version may break it (the library's soname carries both). */
#define MEMD_MAKE_VERSION(major, minor) ((((uint32_t)(major)) << 16) | ((uint32_t)(minor)))
#define MEMD_VERSION_MAJOR(version) ((uint32_t)(version) >> 16)
#define MEMD_VERSION_MINOR(version) ((uint32_t)(version)&0xffffu)
#define MEMD_ABI_VERSION MEMD_MAKE_VERSION(0, 4)

/* The ABI of the library loaded at run time: compare with MEMD_ABI_VERSION
 * (the same major, a minor at least the header's). */
uint32_t memd_abi_version(void);
/* The library's release, "0.4.0". Static storage. */
const char* memd_version_string(void);

/* ---- Errors ---- */

typedef enum memd_code {
  MEMD_OK = 0,
  MEMD_CANCELLED = 1,
  MEMD_UNKNOWN = 2,
  MEMD_INVALID_ARGUMENT = 3,
  MEMD_DEADLINE_EXCEEDED = 4,
  MEMD_NOT_FOUND = 5,
  MEMD_ALREADY_EXISTS = 6,
  MEMD_PERMISSION_DENIED = 7,
  MEMD_RESOURCE_EXHAUSTED = 8,
  MEMD_FAILED_PRECONDITION = 9,
  MEMD_ABORTED = 10,
  MEMD_OUT_OF_RANGE = 11,
  MEMD_UNIMPLEMENTED = 12,
  MEMD_INTERNAL = 13,
  MEMD_UNAVAILABLE = 14,
  MEMD_DATA_LOSS = 15,
  MEMD_UNAUTHENTICATED = 16,
  MEMD_CODE_FORCE_INT32 = 0x7fffffff /* Keeps the enum 32 bits wide. */
} memd_code;

/* What went wrong: a code and a message. Owned by the caller. */
typedef struct memd_error memd_error;

memd_code memd_error_code(const memd_error* error); /* MEMD_OK for NULL */
/* Owned by `error`, valid until memd_error_free; "" for NULL. */
const char* memd_error_message(const memd_error* error);
void memd_error_free(memd_error* error); /* NULL: nothing */
/* "NOT_FOUND", ...; "UNKNOWN_CODE" outside 0-16. Static storage. */
const char* memd_code_name(memd_code code);

/* ---- Strings ---- */

/* Frees a string the library returned through a `char**` (the JSON
 * reports, memd_device_location). NULL: nothing. */
void memd_string_free(char* text);

/* ---- Clients ---- */

/* A connection to the local memd daemon: a session (credentials, liveness,
 * descriptor passing) over its Unix socket. The daemon ends every lease of
 * a process that exits or dies. */
typedef struct memd_client memd_client;

typedef struct memd_connect_options {
  size_t struct_size; /* sizeof(memd_connect_options) */
  /* NULL or "": $MEMD_SOCKET_DIR, else the user's own daemon's directory
   * ($XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID; /run/memd for root), then
   * /run/memd (the system service's), as ConnectOptions::socket_dir says.
   * Copied by memd_connect. */
  const char* socket_dir;
  /* Upper bound on each call that does not wait for a seal; default 30000. */
  int64_t call_timeout_ms;
  /* Read-only mappings kept after their last lease for a quick reopen, in
   * bytes; default 256 MiB, 0 unmaps at once. */
  uint64_t mapping_cache_bytes;
  /* The uid the daemon must run as, beside root, this process's uid and
   * the owner of a root-made socket directory; -1 (default):
   * $MEMD_DAEMON_UID when set. */
  int64_t daemon_uid;
  /* Since 0.4. Imports of read-only device buffers kept after their last
   * lease for a quick reopen, in bytes of buffers; default 16 GiB, 0 keeps
   * none. They cost no device memory while memd keeps the buffer, and go
   * when memd says it freed it. */
  uint64_t device_cache_bytes;
} memd_connect_options;

void memd_connect_options_init(memd_connect_options* options);

/* Connects to the daemon. On MEMD_OK *client is a new client the caller
 * closes with memd_client_close. Errors: UNAVAILABLE (no daemon there),
 * PERMISSION_DENIED (the socket refuses this user, or the socket directory
 * or the daemon is not one this process trusts), INVALID_ARGUMENT (options:
 * a bad struct_size, a negative timeout, MEMD_DAEMON_UID not a number),
 * RESOURCE_EXHAUSTED (the daemon's session limit). */
memd_code memd_connect(const memd_connect_options* options, memd_client** client,
                       memd_error** error);
/* Ends the session; buffers and transfers of this client stay valid. NULL:
 * nothing. */
void memd_client_close(memd_client* client);

/* This connection's session id, as memd_sessions_json and memctl sessions
 * show it; 0 when the daemon is unreachable (it reconnects on the next
 * call) or for NULL. */
uint64_t memd_client_session_id(const memd_client* client);
/* The socket directory this client connected to (the options' or the
 * default one). Owned by `client`, valid until memd_client_close; "" for
 * NULL. */
const char* memd_client_socket_dir(const memd_client* client);

/* One round trip to the daemon, nothing else. Errors: UNAVAILABLE,
 * DEADLINE_EXCEEDED (call_timeout_ms), INVALID_ARGUMENT (NULL client). */
memd_code memd_ping(memd_client* client, memd_error** error);

/* ---- Reports, as JSON ----
 *
 * The documents memctl prints with --json, with the same field names (a
 * script reads one vocabulary); new fields may appear, none is renamed or
 * dropped. On MEMD_OK *json is a compact UTF-8 document the caller frees
 * with memd_string_free; bytes that were not UTF-8 (a process's command
 * line may hold any) read U+FFFD. Times are nanoseconds since the Unix
 * epoch (*_unix_ns). Errors of each: UNAVAILABLE, INVALID_ARGUMENT (a NULL
 * argument), and those it lists. */

/* An object, as `memctl stats --json`: version, backend, socket_dir,
 * started_unix_ns, metrics_address, buffers, sessions, leases, waits,
 * daemon_wide, pools[], devices[], transfers{}, durability{}. For a user
 * other than root, buffers, sessions, leases, waits and transfers count
 * this uid's alone (daemon_wide false). */
memd_code memd_stats_json(memd_client* client, char** json, memd_error** error);
/* An array, as `memctl sessions --json`: objects of id, pid, uid, gid,
 * command, lease_count, started_unix_ns, created_bytes; this user's
 * sessions (every one for root). */
memd_code memd_sessions_json(memd_client* client, char** json, memd_error** error);
/* An object, as `memctl transfers --json`: transfers[] (objects of
 * progress (as memd_transfer_progress_json), priority ("critical",
 * "normal", "background"), source_name, source_location, source_offset,
 * destination_name, destination_location, destination_offset, age_ns,
 * session_id, pid, uid, command; oldest first; at most 1000) and omitted
 * (how many more there were). The copies queued or running now: this
 * user's (every user's for root). */
memd_code memd_transfers_json(memd_client* client, char** json, memd_error** error);
/* An array, as `memctl usage --json`: objects of uid, location, bytes,
 * buffers, quota_bytes (0: none), by uid then location; this user's
 * (every user's for root). */
memd_code memd_usage_json(memd_client* client, char** json, memd_error** error);
/* An array, as `memctl advise --json`: objects of subject, action
 * ("prefetch", "move", "drop_replica", "unlink"), locations[], evidence,
 * bytes, for this user's buffers (every buffer for root) whose names start
 * with `prefix` (NULL or "": all), by subject then action. Errors:
 * UNIMPLEMENTED (a daemon without advice). */
memd_code memd_advise_json(memd_client* client, const char* prefix, char** json,
                           memd_error** error);
/* An object, as `memctl leaks --json`: leaks[] (objects of uid, kind
 * ("never_opened", "unsealed_idle", "idle_lease", "many_leases"), subject,
 * bytes, age_seconds, pid, evidence; by uid, then kind, then oldest first;
 * at most 4096) and omitted (how many more there were). This user's
 * buffers, leases and sessions (every user's for root) that look
 * forgotten: buffers and leases at least `older_than_seconds` old (0: an
 * hour), sessions holding at least `many_leases` leases (0: 1024).
 * Errors: INVALID_ARGUMENT (older_than_seconds beyond 3650 days),
 * UNIMPLEMENTED (a daemon without the report). */
memd_code memd_leaks_json(memd_client* client, uint64_t older_than_seconds,
                          uint64_t many_leases, char** json, memd_error** error);
/* Gives idle pool memory back to the system now: the pool at `location`
 * ("host", "pinned", "device:N"), or every pool for NULL or "". An array,
 * as `memctl trim --json`: objects of location, released_bytes and
 * driver_freed_bytes (how much the GPU driver's free memory rose across
 * the trim: less than released_bytes while clients' imports hold what memd
 * gave back; null for a pool whose driver cannot say). Errors:
 * PERMISSION_DENIED (root or the daemon's user only), NOT_FOUND (no such
 * pool). */
memd_code memd_trim_json(memd_client* client, const char* location, char** json,
                         memd_error** error);

/* ---- GPU numbering ----
 *
 * memd names GPUs by its own CUDA ordinals ("device:N"); this process numbers
 * them differently where CUDA_VISIBLE_DEVICES or a container shows it other
 * GPUs or another order. These translate through the GPUs' UUIDs (one stats
 * call each). */

/* This process's CUDA ordinal for `location` ("device:N"): the device to
 * make current before opening a buffer there. Errors: INVALID_ARGUMENT (not
 * "device:N"), NOT_FOUND (memd serves no such GPU, or this process does not
 * see it), UNAVAILABLE (no daemon, or no CUDA driver in this process). */
memd_code memd_cuda_device(memd_client* client, const char* location, int* cuda_device,
                           memd_error** error);
/* The location ("device:N") naming this process's CUDA device
 * `cuda_device`, for memd_create; freed with memd_string_free. Errors:
 * NOT_FOUND (this process has no such device, or memd does not serve it),
 * UNAVAILABLE (no daemon, or no CUDA driver in this process). */
memd_code memd_device_location(memd_client* client, int cuda_device, char** location,
                               memd_error** error);

/* ---- Buffers ---- */

/* A lease on a named buffer and its mapping into this process. */
typedef struct memd_buffer memd_buffer;

/* A buffer attribute: dtype=float16, shape=4096,4096, ... */
typedef struct memd_attr {
  const char* key;   /* [A-Za-z0-9._-], 1 to 64 bytes */
  const char* value; /* printable ASCII, up to 256 bytes */
} memd_attr;

typedef struct memd_create_options {
  size_t struct_size; /* sizeof(memd_create_options) */
  /* "host" (default, NULL), "pinned", "device:N", or "auto": memd chooses
   * from the size, access_hint and each location's free memory now, only
   * among mappable_locations (memd_buffer_placement says which rule). */
  const char* location;
  /* Permission bits like a file's: 0600 (default) owner only, 0640 group
   * may read, 0666 everyone may read and write. */
  uint32_t mode;
  int ephemeral; /* Nonzero: the buffer ends with its last lease. */
  int populate;  /* Nonzero: map every page at once. */
  /* At most 16; 1 KiB in all. Copied by the call. */
  const memd_attr* attrs;
  size_t attr_count;
  /* memd_open_or_create only: the uid that must own an existing buffer
   * (PERMISSION_DENIED otherwise); -1 (default): any. */
  int64_t existing_owner;
  /* Location "auto" only (INVALID_ARGUMENT otherwise). NULL or "" (default),
   * "device_frequent", "host_frequent", "read_mostly", "streaming". */
  const char* access_hint;
  /* Location "auto" only: where this process can map the buffer ("host",
   * "pinned", "device:N"; at most 64, copied by the call). None (default):
   * libmemd lists host, pinned and every GPU of memd's this process's CUDA
   * sees. */
  const char* const* mappable_locations;
  size_t mappable_location_count;
  /* What memd may take back when the location is full and nobody holds the
   * buffer: NULL or "pinned" (default) nothing; "demotable" its copies away
   * from home; "evictable" also the whole buffer (an open of the name is
   * then MEMD_NOT_FOUND saying when). Since 0.4. */
  const char* retention;
  /* How long a create whose location is full (once what may give way has)
   * waits for memory, in turn with other waiting creates; 0 (default) fails
   * at once with MEMD_RESOURCE_EXHAUSTED. Past it: MEMD_DEADLINE_EXCEEDED
   * saying what was free, asked and held. memd_open_or_create waits for
   * memory only when it would create, and then the longer of this and its
   * seal wait. Since 0.4. */
  int64_t wait_for_memory_ms;
  /* Host and pinned buffers: the NUMA node to bind the pages to before any
   * is touched: NULL or "" the daemon's default (config numa, off unless
   * set); "off"; "auto" (a pinned buffer's GPU's node, else this process's);
   * or a node number such as "1" (one the machine lacks is
   * MEMD_INVALID_ARGUMENT). Since 0.4. */
  const char* numa;
  /* Nonzero: a host or pinned buffer keeps its descriptor for
   * memd_buffer_write_from_file (one descriptor more in this process until
   * the seal or the release). Since 0.4. */
  int keep_descriptor;
} memd_create_options;

void memd_create_options_init(memd_create_options* options);

typedef struct memd_open_options {
  size_t struct_size; /* sizeof(memd_open_options) */
  /* Zero (default): a read-only lease on a sealed buffer. Nonzero: a
   * writable lease on a buffer still being written. */
  int writable;
  /* How long a read-only open waits for the buffer to exist and be
   * sealed; 0 (default) fails at once. */
  int64_t wait_ms;
  int populate; /* Nonzero: map every page at once. */
  /* The uid that must own the buffer (anyone may create a name first);
   * -1 (default): any owner whose mode lets this user read. */
  int64_t owner;
  /* Where to map it: "host", "pinned", "device:N"; NULL or "" (default):
   * its home. Where the buffer has no current copy the daemon makes one
   * (once for every opener there, charged to this user's quota) and the
   * open waits for it: with wait_ms 0, as long as the copy takes (up to
   * ten minutes). Copied by the call. */
  const char* location;
  /* With a location: when the copy finds it full after what may give way
   * has, wait up to this long for memory there instead of failing
   * RESOURCE_EXHAUSTED, then for the copy; the whole open waits at most
   * the longer of this and a nonzero wait_ms. 0 (default): fail at once.
   * Without a location: INVALID_ARGUMENT. */
  int64_t wait_for_memory_ms;
  /* As memd_create_options.keep_descriptor, for a writable open. Since 0.4. */
  int keep_descriptor;
} memd_open_options;

void memd_open_options_init(memd_open_options* options);

/* Creates a buffer of `size` bytes named `name` and returns a writable
 * lease on it in *buffer (released with memd_buffer_release). Errors:
 * INVALID_ARGUMENT (name, size, mode, location, attributes: the message
 * names the limit), ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED
 * (memory, quotas, limits, with the numbers), UNAVAILABLE, UNAUTHENTICATED
 * (the daemon restarted; call again). */
memd_code memd_create(memd_client* client, const char* name, uint64_t size,
                      const memd_create_options* options, memd_buffer** buffer,
                      memd_error** error);

/* Opens an existing buffer. Errors: NOT_FOUND, PERMISSION_DENIED (mode, or
 * another owner than options->owner), FAILED_PRECONDITION (a writable open
 * of a sealed buffer), DEADLINE_EXCEEDED (not sealed within wait_ms, the
 * message saying when no buffer of the name existed at all; or the copy at
 * options->location not done), RESOURCE_EXHAUSTED (the copy
 * at options->location: memory, this user's quota there),
 * INVALID_ARGUMENT, UNAVAILABLE, UNAUTHENTICATED. */
memd_code memd_open(memd_client* client, const char* name, const memd_open_options* options,
                    memd_buffer** buffer, memd_error** error);

/* Creates the buffer if the name is free (a writable lease,
 * memd_buffer_created nonzero), else opens it read-only, waiting up to
 * `wait_ms` for its seal. Errors: those of memd_create and memd_open. */
memd_code memd_open_or_create(memd_client* client, const char* name, uint64_t size,
                              const memd_create_options* options, int64_t wait_ms,
                              memd_buffer** buffer, memd_error** error);

/* Removes the name; leased memory lives until its last lease ends. Errors:
 * NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT, UNAVAILABLE. */
memd_code memd_unlink(memd_client* client, const char* name, memd_error** error);

/* Makes the contents final and wakes waiting readers. Errors:
 * FAILED_PRECONDITION (a read-only lease, sealed already, unlinked),
 * NOT_FOUND (the lease is gone: after a daemon restart that did not hand
 * it back; a client re-claims its leases by itself where memd kept them,
 * see memd::Client in memd/client.h). */
memd_code memd_buffer_seal(memd_buffer* buffer, memd_error** error);

/* Copies `length` bytes of the file `fd` from `file_offset` into the buffer
 * at `offset`: the fast way to load a file into a buffer. The buffer needs a
 * writable lease, before its seal; `fd` a regular file (its position does
 * not move). `threads`: 0 for one per CPU this process may run on, at most
 * 8. A host or pinned buffer, created or opened with keep_descriptor, is
 * written through its descriptor (sendfile(2) on `threads` threads),
 * faulting no page of the mapping. A device buffer is filled through a
 * staging buffer this call creates (ephemeral, ".libmemd/staging-...", 256
 * MiB at most, pinned where it can be) and releases before it returns:
 * `threads` threads (at most 16) read the file, with O_DIRECT where the
 * filesystem allows it and the page cache does not hold it, while memd
 * copies the slices read before to the GPU, as `memctl put` does; the
 * staging counts against the caller's quotas. See Buffer::WriteFromFile in
 * memd/client.h for the speed to expect. Errors: FAILED_PRECONDITION (a
 * read lease, sealed, a host buffer without a kept descriptor),
 * INVALID_ARGUMENT (past the buffer's end: the numbers; a pipe or socket;
 * threads < 0), OUT_OF_RANGE (the file ends first), the file's errors; for
 * a device buffer also those of memd_create (the staging) and of a copy.
 * Since 0.4. */
memd_code memd_buffer_write_from_file(memd_buffer* buffer, int fd, uint64_t file_offset,
                                      uint64_t length, uint64_t offset, int threads,
                                      memd_error** error);

/* Ends the lease, unmaps and frees `buffer`, whatever the outcome; where
 * DLPack tensors exported from it live, the last of them ends the lease
 * instead (see memd_buffer_to_dlpack). Errors (the lease ended anyway):
 * NOT_FOUND (the daemon forgot it), UNAVAILABLE. NULL: MEMD_OK. Since 0.4,
 * against memd 0.4 and later, the release goes over the session socket
 * without waiting for memd's answer (MEMD_OK once sent; the next call this
 * client makes comes after it): the errors are then not reported. */
memd_code memd_buffer_release(memd_buffer* buffer, memd_error** error);

/* The buffer's bytes in this process; NULL for device buffers. Valid until
 * memd_buffer_release. Read-only leases are mapped read-only: a write
 * through memd_buffer_data is a SIGSEGV. */
const void* memd_buffer_data(const memd_buffer* buffer);
/* The same bytes, writable; NULL for a read-only lease or a device buffer. */
void* memd_buffer_mutable_data(memd_buffer* buffer);
uint64_t memd_buffer_size(const memd_buffer* buffer);
/* Device buffers: where the buffer starts in this process's GPU address
 * space; else 0. A CUdeviceptr valid in the CUDA context current on the
 * thread that opened it or, where none was, in the primary context of
 * memd_buffer_device (the CUDA runtime's, PyTorch's), which libmemd then
 * retains while the pointer is valid but does not leave current. */
uint64_t memd_buffer_device_pointer(const memd_buffer* buffer);
/* This process's CUDA ordinal of the buffer's GPU; -1 for host memory. */
int memd_buffer_device(const memd_buffer* buffer);
/* Where the bytes are, as a DLPack device type (dlpack.h): kDLCPU (1) for
 * host memory, kDLCUDA (2) for a CUDA GPU, kDLOneAPI (14) for a Level Zero
 * GPU; 0 for NULL. What a binding needs to export the buffer itself. */
int memd_buffer_device_type(const memd_buffer* buffer);
int memd_buffer_writable(const memd_buffer* buffer);
/* memd_open_or_create: nonzero when this call created the buffer. */
int memd_buffer_created(const memd_buffer* buffer);
/* The daemon's id of this lease (unique for its lifetime); 0 for NULL. */
uint64_t memd_buffer_lease_id(const memd_buffer* buffer);

/* One copy of a buffer (memd_buffer_info.replicas). */
typedef struct memd_replica {
  const char* location; /* "host", "pinned", "device:N" */
  /* "current" (holds the buffer's generation; may be leased), "stale" (an
   * older one, kept for those who hold it), "filling" (a copy into it runs). */
  const char* state;
  uint64_t generation;
  uint32_t readers;
  uint32_t writers;
  uint64_t bytes; /* What it takes where it lives, */
  uint32_t charged_uid; /* charged to this uid. */
} memd_replica;

/* What the daemon says about a buffer. Strings are NUL-terminated. The
 * library may append fields: read one past the fields of an older header
 * only where struct_size covers it. */
typedef struct memd_buffer_info {
  size_t struct_size; /* sizeof(memd_buffer_info) of the library */
  const char* name;
  uint64_t id; /* Unique for the daemon's lifetime. */
  uint64_t size;
  const char* location; /* "host", "pinned", "device:N" */
  uint32_t owner_uid;
  uint32_t owner_gid;
  uint32_t mode;
  int sealed;
  int ephemeral;
  int unlinked;
  uint32_t lease_count;
  int32_t creator_pid;
  int64_t created_unix_ns;
  int64_t sealed_unix_ns; /* 0 while not sealed */
  const memd_attr* attrs; /* Sorted by key. */
  size_t attr_count;
  /* memd_stat, memd_list, memd_prefetch, memd_drop_replica and
   * memd_buffer_sync fill these (memd_buffer_get_info's may be empty).
   * The buffer's state in unified-memory words ("host_only",
   * "device_only", "synchronized", "host_dirty", "device_dirty", "mixed"),
   * its content's generation, and the last copy that failed ("" none).
   * `location` above is the home; in memd_buffer_get_info, where that
   * lease's copy lives. */
  const char* sync_state;
  uint64_t generation;
  const char* fill_failure;
  const memd_replica* replicas; /* Host, pinned, then devices. */
  size_t replica_count;
} memd_buffer_info;

/* As of the call that granted the lease (and the seal). Owned by `buffer`,
 * valid until memd_buffer_release. */
const memd_buffer_info* memd_buffer_get_info(const memd_buffer* buffer);
/* The value of attribute `key`, or NULL. Owned by `buffer`. */
const char* memd_buffer_attr(const memd_buffer* buffer, const char* key);
/* Location "auto": which rule chose the buffer's location, with its numbers;
 * "" for a named location (or after memd restarted), NULL for NULL. Owned
 * by `buffer`. (A function since 0.2, when memd_buffer_info, an array
 * element of memd_buffer_list, could not grow; it grew in 0.3.) */
const char* memd_buffer_placement(const memd_buffer* buffer);
/* "pinned", "demotable" or "evictable" (memd_create_options.retention);
 * NULL for NULL. Owned by `buffer`. Since 0.4. */
const char* memd_buffer_retention(const memd_buffer* buffer);
/* The NUMA node the buffer's pages were bound to (memd_create_options.numa);
 * -1 when they were not (numa off, a machine of one node, device memory)
 * and for NULL. Since 0.4. */
int memd_buffer_numa_node(const memd_buffer* buffer);

/* The buffer's info as memctl inspect --json prints it (with "placement"),
 * fresh from the daemon; the caller frees *json with memd_string_free.
 * Errors: as memd_stat. */
memd_code memd_stat_json(memd_client* client, const char* name, char** json,
                         memd_error** error);

/* Fresh from the daemon. On MEMD_OK *info is one allocation the caller
 * frees with memd_buffer_info_free. Errors: NOT_FOUND, PERMISSION_DENIED,
 * INVALID_ARGUMENT, UNAVAILABLE. */
memd_code memd_stat(memd_client* client, const char* name, memd_buffer_info** info,
                    memd_error** error);
void memd_buffer_info_free(memd_buffer_info* info); /* NULL: nothing */

/* Makes (or refreshes) the buffer's copy at `location` ("host", "pinned",
 * "device:N") without a lease, charged to this user. wait_ms 0 starts the
 * copy and returns (the replica reads "filling"); else waits up to wait_ms
 * for it to be current. On MEMD_OK *info is as memd_stat's (NULL info: not
 * wanted). Errors: NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (a
 * location this node lacks, a negative wait_ms), RESOURCE_EXHAUSTED
 * (memory, this user's quota at `location`, its transfers in flight),
 * DEADLINE_EXCEEDED (not current within wait_ms), the copy's own failure,
 * UNAVAILABLE. */
memd_code memd_prefetch(memd_client* client, const char* name, const char* location,
                        int64_t wait_ms, memd_buffer_info** info, memd_error** error);

typedef struct memd_prefetch_options {
  size_t struct_size; /* sizeof(memd_prefetch_options) */
  int64_t wait_ms;    /* As memd_prefetch's; 0 (default): start the copy and return. */
  /* A copy at a full location waits up to this long for memory there
   * instead of failing RESOURCE_EXHAUSTED; the call then waits for the copy
   * too (with wait_ms 0, as long as it takes, up to ten minutes), at most
   * the longer of this and a nonzero wait_ms. 0 (default): fail at once. */
  int64_t wait_for_memory_ms;
  /* The uid that must own the buffer; -1 (default): any owner whose mode
   * lets this user read. */
  int64_t owner;
} memd_prefetch_options;

void memd_prefetch_options_init(memd_prefetch_options* options);

/* memd_prefetch with options (NULL: the defaults). Errors: memd_prefetch's,
 * DEADLINE_EXCEEDED also when no memory came within wait_for_memory_ms
 * (the message says what is free at `location` and who holds it). */
memd_code memd_prefetch_with(memd_client* client, const char* name, const char* location,
                             const memd_prefetch_options* options, memd_buffer_info** info,
                             memd_error** error);
/* Removes the buffer's copy at `location`, which nobody may hold. On
 * MEMD_OK *info as memd_stat's (NULL info: not wanted). Errors: NOT_FOUND
 * (no such buffer or copy), PERMISSION_DENIED, FAILED_PRECONDITION (the
 * home, or a copy someone holds), INVALID_ARGUMENT, UNAVAILABLE. */
memd_code memd_drop_replica(memd_client* client, const char* name, const char* location,
                            memd_buffer_info** info, memd_error** error);

/* Publishes what this writer wrote to the buffer's other copies: this
 * lease's copy becomes the buffer's new generation; the others are
 * refreshed now, or when next opened if someone holds them. On MEMD_OK
 * *info as memd_stat's (NULL info: not wanted), freed with
 * memd_buffer_info_free. Errors: FAILED_PRECONDITION (a read-only lease,
 * sealed, unlinked), NOT_FOUND (the lease is gone), UNAVAILABLE. */
memd_code memd_buffer_sync(memd_buffer* buffer, memd_buffer_info** info, memd_error** error);

/* Buffers this user may read whose names start with `prefix` (NULL: all),
 * by name. */
typedef struct memd_buffer_list {
  size_t count;
  const memd_buffer_info* items;
} memd_buffer_list;

/* On MEMD_OK *list is one allocation the caller frees with
 * memd_buffer_list_free. Errors: INVALID_ARGUMENT, UNAVAILABLE. */
memd_code memd_list(memd_client* client, const char* prefix, memd_buffer_list** list,
                    memd_error** error);
void memd_buffer_list_free(memd_buffer_list* list); /* NULL: nothing */
/* The same listing as an array of the objects memd_stat_json gives (as
 * `memctl ls --json`): every field, those memd_buffer_info lacks
 * (retention...) too. Errors: INVALID_ARGUMENT, UNAVAILABLE. Since 0.4. */
memd_code memd_list_json(memd_client* client, const char* prefix, char** json,
                         memd_error** error);
/* memd_list_json_flags' flags, or'ed. */
/* Also buffers of matching names that were unlinked but still take memory
 * (leased, or held by copies in flight), with "unlinked": true, each after
 * the named buffer of its name: a name may then appear more than once. An
 * older daemon lists none. */
#define MEMD_LIST_UNLINKED 1u
/* memd_list_json with `flags` (MEMD_LIST_*; 0 lists as memd_list_json).
 * Errors: INVALID_ARGUMENT (a flag this library does not know, with its
 * value), UNAVAILABLE. Since 0.4. */
memd_code memd_list_json_flags(memd_client* client, const char* prefix, unsigned flags,
                               char** json, memd_error** error);

/* ---- DLPack ---- */

/* DLPack 1.0's versioned tensor (dmlc/dlpack v1.0 include/dlpack/dlpack.h),
 * which can say "read-only". Debian 12's libdlpack-dev is 0.6 and lacks it,
 * so memd declares it here, with 1.0's layout, unless dlpack.h already did
 * (then memd_DLManagedTensorVersioned is DLManagedTensorVersioned). */
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
typedef struct memd_DLPackVersion {
  uint32_t major;
  uint32_t minor;
} memd_DLPackVersion;
typedef struct memd_DLManagedTensorVersioned {
  memd_DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct memd_DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} memd_DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#else
typedef DLManagedTensorVersioned memd_DLManagedTensorVersioned;
#endif

typedef struct memd_dlpack_options {
  size_t struct_size; /* sizeof(memd_dlpack_options) */
  /* Element type; default uint8 (kDLUInt, 8 bits, 1 lane). Whole bytes. */
  DLDataType dtype;
  /* 1 to 32 dimensions, row-major, `ndim` of them in `shape` (copied).
   * ndim 0 (default): one dimension, of every whole element the buffer
   * holds (zero dimensions with `scalar`). */
  int32_t ndim;
  const int64_t* shape;
  /* memd_buffer_to_dlpack only: DLPack 0.6 cannot say "read-only", and a
   * consumer (torch) may write through what it imports: a read-only export
   * (a read-only lease, or read_only set) is made only when this is
   * nonzero, the caller promising that nothing writes. */
  int allow_read_only;
  /* Since 0.4 (a caller whose struct_size ends before these gets the
   * defaults). Called once, with on_delete_context, by the tensor's
   * deleter, on the thread that runs it, after the tensor let go of the
   * memory (the lease may have ended within the deleter). Never called when
   * the export fails: the context is then still the caller's. Default
   * NULL: none. */
  void (*on_delete)(void* context);
  void* on_delete_context;
  /* Nonzero: export read-only even from a writable lease (a sealed buffer,
   * memory the caller hands out read-only): the versioned tensor carries
   * DLPACK_FLAG_BITMASK_READ_ONLY, the 0.6 one needs allow_read_only. */
  int read_only;
  /* Nonzero, with ndim 0: a tensor of zero dimensions (one element). */
  int scalar;
} memd_dlpack_options;

void memd_dlpack_options_init(memd_dlpack_options* options);

/* Exports the buffer's memory as a DLPack 0.6 tensor: kDLCPU for host
 * memory, kDLCUDA and this process's ordinal for CUDA device buffers,
 * kDLOneAPI (14) and this process's Level Zero device index for Level Zero
 * ones; row-major, with its strides given. The tensor holds the mapping (and
 * the lease) until its deleter runs, even past memd_buffer_release: the
 * consumer calls `(*tensor)->deleter(*tensor)` once, from any thread.
 * Errors: INVALID_ARGUMENT (dtype, ndim, a negative dimension, more
 * elements than the buffer holds: the numbers; a bad struct_size),
 * FAILED_PRECONDITION (a read-only export without allow_read_only; a
 * released buffer). */
memd_code memd_buffer_to_dlpack(memd_buffer* buffer, const memd_dlpack_options* options,
                                DLManagedTensor** tensor, memd_error** error);

/* The same as a DLPack 1.0 versioned tensor (version 1.0), which consumers
 * such as numpy 2 and torch ask for by max_version: a read-only lease (or
 * read_only set) exports with DLPACK_FLAG_BITMASK_READ_ONLY in `flags`
 * instead of being refused; allow_read_only is not read. Since 0.4.
 * Errors: INVALID_ARGUMENT (as memd_buffer_to_dlpack), FAILED_PRECONDITION
 * (a released buffer). */
memd_code memd_buffer_to_dlpack_versioned(memd_buffer* buffer,
                                          const memd_dlpack_options* options,
                                          memd_DLManagedTensorVersioned** tensor,
                                          memd_error** error);

/* ---- Transfers ----
 *
 * Copies the daemon runs (its copy engine): host to device, device to host,
 * device to device, host to host, in chunks, with priorities, deadlines,
 * retries of transient driver errors and progress. The daemon moves the
 * bytes whether or not anyone waits. */

/* A copy in the daemon. One thread at a time (the handle is not
 * thread-safe); it may outlive its client and its buffers. The daemon
 * forgets a session's transfers when the session ends, and keeps its last
 * 64 finished ones. */
typedef struct memd_transfer memd_transfer;

/* Copies are served at chunk boundaries, critical before normal before
 * background; a waiting copy rises a class as it ages. */
typedef enum memd_priority {
  MEMD_PRIORITY_CRITICAL = 0,
  MEMD_PRIORITY_NORMAL = 1,
  MEMD_PRIORITY_BACKGROUND = 2,
  MEMD_PRIORITY_FORCE_INT32 = 0x7fffffff /* Keeps the enum 32 bits wide. */
} memd_priority;

typedef struct memd_copy_options {
  size_t struct_size;     /* sizeof(memd_copy_options) */
  memd_priority priority; /* default MEMD_PRIORITY_NORMAL */
  /* 0 (default): none; else the absolute time (nanoseconds since the Unix
   * epoch, CLOCK_REALTIME) by which the copy must be done: it fails with
   * DEADLINE_EXCEEDED otherwise, and a time already past refuses it. */
  int64_t deadline_unix_ns;
  /* Bytes per chunk: 0 (default) for the daemon's choice (4 MiB), else
   * 1 MiB up to the daemon's staging slot size (16 MiB by default). */
  uint64_t chunk_bytes;
} memd_copy_options;

void memd_copy_options_init(memd_copy_options* options);

/* memd_copy's length: each range runs from its offset to the end of its
 * buffer, and the two must then be as long (as Python's Client.copy with
 * length=None). */
#define MEMD_TO_END UINT64_MAX

/* Copies `length` bytes of `source` from `source_offset` to `destination`
 * from `destination_offset` (buffers this process leases through `client`;
 * the destination's lease writable, its buffer not sealed) in the daemon,
 * and returns at once: *transfer is a new handle the caller frees with
 * memd_transfer_free. The buffers may be released once the call returns:
 * the daemon keeps their memory until the copy ends (but releasing the last
 * lease of a destination nobody sealed frees that buffer and cancels the
 * copy). The call only reads the buffers, yet the one-thread-at-a-time rule
 * of memd_buffer holds for it. Errors, before
 * anything moves: INVALID_ARGUMENT (a NULL argument, options, a buffer of
 * another client or released, ranges out of bounds or of different
 * lengths, chunk_bytes: with the numbers), FAILED_PRECONDITION (the
 * destination lease is read-only or its buffer sealed; the GPU is
 * unhealthy), NOT_FOUND (a lease gone), RESOURCE_EXHAUSTED (this session's
 * or the daemon's bytes in flight, with the numbers), DEADLINE_EXCEEDED
 * (deadline_unix_ns already past), UNAVAILABLE. */
memd_code memd_copy(memd_client* client, const memd_buffer* source, uint64_t source_offset,
                    const memd_buffer* destination, uint64_t destination_offset,
                    uint64_t length, const memd_copy_options* options,
                    memd_transfer** transfer, memd_error** error);

/* The daemon's id of the copy (as its progress says); 0 for NULL. */
uint64_t memd_transfer_id(const memd_transfer* transfer);

/* Waits until the copy ends or `timeout_ms` passes (-1: no limit; 0: looks
 * once), and returns how it ended: MEMD_OK, or the copy's own outcome:
 * CANCELLED, DEADLINE_EXCEEDED (its deadline, or no chunk finished for the
 * daemon's stall timeout), the driver's error naming the chunk, call and
 * CUresult. When this wait runs out first, DEADLINE_EXCEEDED too, and the
 * copy goes on (its progress state is not finished); the progress's
 * error_code tells the two apart. Other errors: INVALID_ARGUMENT (a
 * timeout below -1, NULL), NOT_FOUND (the daemon restarted: the copy
 * ended with its session), UNAVAILABLE. */
memd_code memd_transfer_wait(memd_transfer* transfer, int64_t timeout_ms, memd_error** error);

/* The copy's progress now, a JSON object (freed with memd_string_free):
 * id, state ("queued", "running", "done", "failed", "cancelled"),
 * bytes_done, bytes_total, direction ("h2h", "h2d", "d2h", "d2d"), path
 * (how the bytes moved: "cpu", "staged", "direct", "device",
 * "peer_staged"; "" before the first chunk), device (memd's ordinal of the
 * GPU moving them; -1 host to host), retries, error_code (what ended a
 * failed or cancelled copy, a memd_code; 0 otherwise), error_message ("" when
 * error_code is 0), elapsed_ns (from the first chunk to the end, or to now).
 * Errors: those of memd_transfer_wait but the copy's outcome. */
memd_code memd_transfer_progress_json(memd_transfer* transfer, char** json,
                                      memd_error** error);

/* Stops the copy at its next chunk boundary (chunks on a GPU finish
 * first); a wait then returns CANCELLED. Cancelling a finished copy
 * changes nothing (MEMD_OK). Errors: INVALID_ARGUMENT (NULL), NOT_FOUND
 * (the daemon restarted, or it forgot the copy), UNAVAILABLE. */
memd_code memd_transfer_cancel(memd_transfer* transfer, memd_error** error);

/* Frees the handle; the copy goes on (cancel first to stop it). NULL:
 * nothing. */
void memd_transfer_free(memd_transfer* transfer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MEMD_MEMD_H_ */
