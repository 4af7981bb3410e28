#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/location.h"
#include "common/unique_fd.h"
#include "daemon/backend/copy_device.h"

namespace memd::backend {

// What a client may do with an exported handle.
enum class Access { kRead, kReadWrite };

// How a client imports an exported handle.
enum class HandleType {
  kHostMemfd,  // A memfd: mmap it.
  kCudaVmmFd,  // A CUDA VMM allocation as a POSIX fd: cuMemImportFromShareableHandle.
  kCudaIpc,    // A legacy CUipcMemHandle (64 bytes, no fd): cuIpcOpenMemHandle.
  // A ze_ipc_mem_handle_t (64 bytes) and the dma-buf fd it names in the
  // daemon: the client writes its own number for the fd it received into
  // the handle, then zeMemOpenIpcHandle.
  kLevelZeroIpc,
};

// What a client receives to reach a segment.
struct ExportedHandle {
  HandleType type = HandleType::kHostMemfd;
  // Owned by the segment, valid while it lives (sending it over SCM_RIGHTS
  // gives the client its own reference); -1 when the type carries none.
  int fd = -1;
  // kCudaIpc: the CUipcMemHandle's bytes; kLevelZeroIpc: the
  // ze_ipc_mem_handle_t's.
  std::string opaque;

  // Whether a client that once received the handle can reach the memory
  // again whenever it likes while holding nothing that keeps the memory: a
  // CUipcMemHandle is bytes, which open (cuIpcOpenMemHandle) whatever lives
  // in the allocation at the time, lease or no lease. A descriptor is the
  // client's own reference instead: what it names lives as long as the
  // descriptor, whatever memd does. Memory behind a replayable handle must
  // stay where it is, neither freed nor given to another domain, while a
  // client that received the handle may still use it.
  //
  // A Level Zero handle is treated the same way although it carries a
  // descriptor: whether an importer's open keeps the memory alive after the
  // exporter frees it is up to the driver (Intel's pools small allocations,
  // and recycles freed ones), so the memory stays while a session that
  // received the handle lives.
  bool replayable() const {
    return type == HandleType::kCudaIpc || type == HandleType::kLevelZeroIpc;
  }
};

// A GPU the backend serves, as operators and clients see it.
struct DeviceInfo {
  int ordinal = 0;  // memd's "device:N": CUDA GPUs first, then Level Zero.
  // "GPU-xxxxxxxx-xxxx-...", as nvidia-smi prints it; "ZE-xxxxxxxx-..." for
  // a Level Zero device.
  std::string uuid;
  std::string name;
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  // The driver answered a free-memory query (free_bytes is its answer);
  // Level Zero 1.4 has none outside Sysman.
  bool has_free = false;
  bool vmm = false;       // Virtual memory management (cuMemCreate...).
  bool posix_fd = false;  // VMM allocations exportable as POSIX fds.
  HandleType handle_type = HandleType::kCudaVmmFd;  // What memd exports.
  std::string api = "cuda";  // "cuda" or "level_zero".
  std::string pci_address = {};  // "dddd:bb:dd.f" where the driver says.
  // Level Zero: the driver passes memory between processes (without it
  // memd does not serve the device).
  bool ipc = false;
};

/// Memory reserved from a backend in one piece: the unit the backend exports
/// and the pool carves. Owns the memory; destroying the segment gives it back
/// (memory a client still maps stays valid for that client until it unmaps).
/// Thread-safe: Export may run concurrently from several threads.
class Segment {
 public:
  virtual ~Segment() = default;

  virtual std::uint64_t size() const = 0;

  // What to send a client for `access`. Host kRead descriptors cannot be
  // mapped writable; device memory has no such guarantee: CUDA's descriptor
  // can be mapped read-write by a client that imports it itself (libmemd
  // maps kRead read-only), and Level Zero's is the same read-write
  // descriptor for every access, which zeMemOpenIpcHandle (libmemd's too)
  // opens read-write. Errors: INTERNAL.
  virtual absl::StatusOr<ExportedHandle> Export(Access access) const = 0;

  // Zeroes every byte, for memory that changes security domain. Errors:
  // UNIMPLEMENTED where the backend cannot (the pool then does not move the
  // segment), RESOURCE_EXHAUSTED, INTERNAL.
  virtual absl::Status Scrub() {
    return absl::UnimplementedError("this backend cannot scrub segments");
  }

  // Frees the memory now although clients may still hold descriptors or
  // mappings of it (a lease ends without an unmap; a client may keep a
  // descriptor on purpose): the pool calls it when it gives an idle segment
  // back, so that memory memd no longer accounts for stops counting against
  // it. Host: punches out every page; what a stale client maps afterwards is
  // fresh zeroed memory charged to that client. Never called for memory of
  // live buffers (nor at shutdown: clients' mappings outlive the daemon).
  // Best effort; the default (device memory) does nothing.
  virtual void Discard() {}

  // Where the daemon reaches the segment's bytes, for the transfer engine:
  // its own mapping of host memory, or the device address of GPU memory.
  // Valid as long as the segment. Errors: UNIMPLEMENTED where the backend
  // cannot reach the memory.
  virtual absl::StatusOr<SegmentMemory> Memory() const {
    return absl::UnimplementedError("this backend's segments cannot be copied by memd");
  }

  // The descriptor that keeps the segment's memory alive outside memd: what
  // memd stores with the service manager so that the next memd can take
  // the segment back (Backend::Adopt) after this one dies. Owned by the
  // segment, valid while it lives; the same kind of descriptor Adopt takes.
  // -1 where the memory cannot outlive memd: legacy CUDA IPC memory is
  // freed with the process that cuMemAlloc'ed it (its handle is bytes, not
  // a reference), and whether a Level Zero dma-buf keeps the memory after
  // its exporter died is up to the driver (not checked yet).
  virtual int DurableFd() const { return -1; }
};

/// Reserves segments at the locations a node offers. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  // "host", "cuda", "level_zero".
  virtual std::string_view name() const = 0;

  // Locations this backend serves on this node.
  virtual std::vector<Location> locations() const = 0;

  // The GPUs it serves (none for host), with free memory as of now.
  virtual std::vector<DeviceInfo> devices() const { return {}; }

  // Segment sizes and offsets at `location` are multiples of this (a power
  // of two).
  virtual std::uint64_t alignment(const Location& location) const = 0;

  // Reserves `bytes` (a multiple of alignment()) at `location`; the memory
  // is committed, so running out is an error here and never a fault later.
  // Errors: INVALID_ARGUMENT (location not served, bad size),
  // RESOURCE_EXHAUSTED (out of memory, locked-memory limit), INTERNAL.
  virtual absl::StatusOr<std::unique_ptr<Segment>> Reserve(
      const Location& location, std::uint64_t bytes) = 0;

  // Reserve, with host memory (host, pinned) placed on NUMA node
  // `numa_node` (MemfdSegment::Create): a node < 0 is plain Reserve. The
  // caller checked the node exists. Errors: Reserve's, INVALID_ARGUMENT
  // for a device location (device memory is where its GPU is), and
  // UNIMPLEMENTED where the backend cannot place memory (the default).
  virtual absl::StatusOr<std::unique_ptr<Segment>> ReserveOnNode(const Location& location,
                                                                 std::uint64_t bytes,
                                                                 int numa_node) {
    if (numa_node < 0) return Reserve(location, bytes);
    return absl::UnimplementedError(absl::StrCat(
        "the ", absl::string_view(name().data(), name().size()),
        " backend cannot place memory on a NUMA node (asked for node ", numa_node, ")"));
  }

  // Takes back a segment a previous memd reserved at `location`, from the
  // descriptor Segment::DurableFd gave (a dup of it: the service manager
  // hands memd its own copies): the same memory, nothing copied. The
  // segment behaves as a Reserve'd one (Export, Memory, Scrub, Discard);
  // its Export hands out the adopted descriptor itself, since a driver may
  // refuse to export imported memory again (CUDA does). Owns `fd` from
  // here on, closed on error. Errors: INVALID_ARGUMENT with the numbers
  // (location not served, size not a positive multiple of the alignment,
  // a descriptor that is not one this backend hands out or not of
  // `bytes`), UNIMPLEMENTED (a backend whose memory cannot outlive memd),
  // the driver's (memory gone with a driver that was reloaded).
  virtual absl::StatusOr<std::unique_ptr<Segment>> Adopt(const Location& location,
                                                         std::uint64_t bytes,
                                                         UniqueFd fd) {
    return absl::UnimplementedError(absl::StrCat(
        "the ", absl::string_view(name().data(), name().size()),
        " backend cannot adopt segments of an earlier memd (asked for ",
        location.ToString(), ")"));
  }

  // The copy side of every GPU it serves, for the transfer engine, by
  // ordinal (none for host). Called once; the backend outlives them.
  // Errors: the driver's.
  virtual absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CopyDevices() {
    return std::vector<std::unique_ptr<CopyDevice>>{};
  }
};

}  // namespace memd::backend
