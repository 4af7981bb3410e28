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
#include "memd/options.h"
#include "memd/records.h"

namespace memd {

namespace internal {
class ClientCore;
struct Mapping;
struct DeviceImport;
struct KeptDescriptor;
struct LeaseTicket;
}  // namespace internal

// A GPU virtual address in this process: CUDA's CUdeviceptr, or a Level
// Zero device pointer (a void*) as an integer.
using DevicePointer = std::uint64_t;

class Buffer;

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

  // Copies `length` bytes of the file `fd` from `file_offset` into the
  // buffer at `offset`, on a writable lease before the seal. `fd` must be a
  // file read at an offset (a regular file, not a pipe); its position does
  // not move. `threads`: 0 for one per CPU this process may run on, at most
  // 8.
  // - Host or pinned buffer (created or opened with keep_descriptor):
  //   through the buffer's descriptor (sendfile(2) on `threads` threads),
  //   so that no page of the mapping faults: a page-cached file arrives at
  //   about the speed of a parallel read (docs/benchmarks.md, "A file into a
  //   buffer").
  // - Device buffer: `threads` reader threads (at most 16) read the file
  //   in 8 MiB pieces, with O_DIRECT where the filesystem allows it and the
  //   page cache does not hold the range's start, into a staging buffer
  //   this call creates through the Buffer's Client (ephemeral, named
  //   ".libmemd/staging-...", slices of 32 MiB, 256 MiB at most; pinned,
  //   or host memory where the daemon has no pinned memory for this user)
  //   and releases before it returns; the daemon copies each slice read to
  //   the GPU while the next ones are read, as `memctl put` does. Expect at
  //   best the slower of the read and the link; measured so far only on the
  //   fake driver, where both share two CPUs: about half a parallel read's
  //   speed (docs/benchmarks.md, "A file into a device buffer"; the GPU
  //   bundle measures it on a GPU). The staging is the caller's own memory
  //   and counts against the caller's quotas. A failure cancels the copies
  //   still running and waits for them (10 s at most): nothing of this call
  //   writes to the buffer after it returned.
  // Errors: FAILED_PRECONDITION (no lease, a read lease, sealed, a host
  // buffer without a kept descriptor), INVALID_ARGUMENT (the range past the
  // buffer's end: the numbers; a file sendfile, or pread, cannot read),
  // OUT_OF_RANGE (the file ends first), the file's errors; for a device
  // buffer also Client::Create's (staging) and Client::Copy's and the
  // copies' (Transfer::Wait), naming the bytes.
  absl::Status WriteFromFile(int fd, std::uint64_t file_offset, std::uint64_t length,
                             std::uint64_t offset = 0, int threads = 0);

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
  // Against memd 0.4 and later the release goes over the session socket
  // without waiting for memd's answer (OK once sent: the fast control
  // path); any call this Client makes afterwards comes after it. Over gRPC
  // (MEMD_FAST_CONTROL_PATH=0, an older memd) the daemon's NOT_FOUND (a
  // lease it forgot) comes back.
  absl::Status Release();

 private:
  friend class internal::ClientCore;

  std::shared_ptr<internal::ClientCore> core_;
  int device_ordinal() const;

  std::shared_ptr<internal::Mapping> mapping_;
  std::shared_ptr<internal::DeviceImport> device_import_;
  std::shared_ptr<internal::KeptDescriptor> descriptor_;  // keep_descriptor.
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
  // Only if `name` still names the buffer `expected_id` (BufferInfo::id, as
  // List or Stat said): FAILED_PRECONDITION, and nothing unlinked, when it
  // was re-created since. Since 0.4.
  absl::Status Unlink(std::string_view name, std::uint64_t expected_id);

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

  // The buffer, with who holds its leases (BufferInfo::holders).
  absl::StatusOr<BufferInfo> Stat(std::string_view name);
  // Buffers this user may read, by name.
  absl::StatusOr<std::vector<BufferInfo>> List(std::string_view prefix = "");
  absl::StatusOr<std::vector<BufferInfo>> List(std::string_view prefix,
                                               const ListOptions& options);
  absl::StatusOr<DaemonStats> Stats();
  absl::StatusOr<std::vector<SessionInfo>> Sessions();
  // Copies queued or running now, this user's (every user's for root),
  // with their progress, buffers and sessions.
  absl::StatusOr<TransferList> Transfers();
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
  // Buffer::WriteFromFile of a device buffer stages through a Client on the
  // Buffer's own core (a Buffer may outlive the Client that made it).
  friend class Buffer;
  explicit Client(std::shared_ptr<internal::ClientCore> core);
  std::shared_ptr<internal::ClientCore> core_;
};

}  // namespace memd
