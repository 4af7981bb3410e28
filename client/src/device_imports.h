#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/cuda/driver.h"
#include "common/plain_mutex.h"
#include "common/unique_fd.h"

namespace memd::internal {

/// One exported device segment made usable in this process, by whichever
/// GPU API serves it. Unmapped (closed) when the last Buffer on it lets go.
/// Immutable, so thread-safe.
struct DeviceImport {
  virtual ~DeviceImport() = default;

  std::uint64_t base = 0;  // Where the segment starts in this process.
  std::uint64_t bytes = 0;
  // This process's number for the GPU: its CUDA ordinal, or its index
  // among the Level Zero GPUs (ze::Loader::gpus()).
  int device = 0;
  bool level_zero = false;
};

/// A CUDA segment: a VMM allocation imported and mapped, or a legacy IPC
/// handle opened. Owns the mapping; shares the driver.
struct CudaImport : DeviceImport {
  ~CudaImport() override;

  std::shared_ptr<const cuda::Driver> driver;
  CUcontext context = nullptr;  // The one it was made in, for closing.
  bool ipc = false;  // Opened with cuIpcOpenMemHandle, else mapped VMM.
  // Set when made in this device's primary context, which this import
  // retained (the calling thread had no current context): released after
  // the mapping closes, so libmemd holds the context exactly while an
  // import made in it lives.
  std::optional<CUdevice> retained_primary;
};

// What a lease says about the device memory to import.
struct DeviceHandle {
  bool ipc = false;
  std::uint64_t segment_id = 0;
  std::uint64_t segment_bytes = 0;
  int device = 0;           // memd's ordinal...
  std::string device_uuid;  // ...and the GPU's UUID (empty from an older memd).
  std::string ipc_handle;  // ipc: the CUipcMemHandle bytes.
  UniqueFd fd;             // VMM: the exported allocation.
  bool writable = false;
};

/// This process's imports of device memory, one per exported segment and
/// shared by every Buffer in it ("imported once per process"); the CUDA
/// driver is loaded on first use. Imports of read-only leases are also kept
/// after their last Buffer goes — the most recently used, up to a byte
/// budget — so that opening the same buffer again needs neither a
/// descriptor nor an import; memd tells the process when it frees such a
/// buffer (OpenRequest.notify_freed), and its import is let go then.
/// Thread-safe.
class DeviceImports {
 public:
  // `keep_bytes`: most bytes of read-only leases' buffers kept imported
  // after their last Buffer goes; 0 keeps none.
  explicit DeviceImports(std::uint64_t keep_bytes = 0) : keep_bytes_(keep_bytes) {}

  std::uint64_t keep_bytes() const { return keep_bytes_; }

  // A buffer a read-only open may find imported already: its id and its
  // segment's import.
  struct Kept {
    std::uint64_t buffer_id = 0;
    std::shared_ptr<DeviceImport> import;
  };
  // The buffer this process last opened read-only under `name` (the name,
  // or name@location) in `generation`, while kept; else nullopt.
  std::optional<Kept> FindKept(std::uint64_t generation, const std::string& name);

  // Keeps `import` for buffer `buffer_id` (`bytes` of it, read-only) after
  // its last Buffer goes, as `name`'s latest; marks it used now. Beyond
  // the budget the least recently used go.
  void Keep(std::uint64_t generation, const std::string& name, std::uint64_t buffer_id,
            std::uint64_t bytes, std::shared_ptr<DeviceImport> import);

  // Lets go of what is kept of these buffers (memd freed them).
  void Forget(std::uint64_t generation, const std::vector<std::uint64_t>& buffer_ids);
  // Lets go of everything kept (the daemon is gone: its ids mean nothing).
  void ForgetAll();

  std::uint64_t kept_bytes() const;

  // The import of `handle`'s segment, made now or shared. Made in the
  // calling thread's current CUDA context when it has one, which must be on
  // the handle's device; a thread with none gets the device's primary
  // context (the one the CUDA runtime, PyTorch and CuPy use), retained by
  // the import until it closes and made current only while importing: the
  // thread is left with no current context, as it came. Errors:
  // FAILED_PRECONDITION (the current context is on another device: the
  // message says what to do), UNAVAILABLE (no CUDA driver in this process),
  // the driver's errors (cuDevicePrimaryCtxRetain's too). Each names memd's
  // location of the buffer and, once known, this process's CUDA ordinal.
  // The segment's GPU is found in this process by its UUID: memd's ordinal
  // is another number where CUDA_VISIBLE_DEVICES or a container shows this
  // process other GPUs; a GPU it cannot see is FAILED_PRECONDITION.
  absl::StatusOr<std::shared_ptr<DeviceImport>> Import(std::uint64_t generation,
                                                       DeviceHandle handle);

  // This process's CUDA ordinal of the GPU with `uuid`, and back. Errors:
  // NOT_FOUND (this process does not see that GPU, or has no such
  // ordinal), UNAVAILABLE (no CUDA driver), the driver's.
  absl::StatusOr<int> OrdinalOf(const std::string& uuid);
  absl::StatusOr<std::string> UuidOf(int ordinal);

 private:
  absl::StatusOr<std::shared_ptr<const cuda::Driver>> DriverLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UUIDs by this process's ordinal, read once: CUDA fixes the visible
  // devices when it initialises.
  absl::StatusOr<const std::vector<std::string>*> UuidsLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> OrdinalOfLocked(const std::string& uuid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One buffer's import kept: most recently used first.
  struct KeptEntry {
    std::uint64_t generation = 0;
    std::uint64_t buffer_id = 0;
    std::string name;
    std::uint64_t bytes = 0;
    std::shared_ptr<DeviceImport> import;
  };
  using KeptList = std::list<KeptEntry>;
  // Unlinks `at`; the import it held goes to `dropped`, released by the
  // caller after the lock (an unmap calls the driver).
  void EraseKeptLocked(KeptList::iterator at,
                       std::vector<std::shared_ptr<DeviceImport>>& dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(kept_mu_);

  const std::uint64_t keep_bytes_;
  mutable PlainMutex kept_mu_;
  KeptList kept_ ABSL_GUARDED_BY(kept_mu_);
  std::uint64_t kept_total_ ABSL_GUARDED_BY(kept_mu_) = 0;
  // (generation, buffer id) -> entry, and name -> entry of its latest.
  absl::flat_hash_map<std::pair<std::uint64_t, std::uint64_t>, KeptList::iterator>
      kept_by_id_ ABSL_GUARDED_BY(kept_mu_);
  absl::flat_hash_map<std::string, KeptList::iterator> kept_by_name_
      ABSL_GUARDED_BY(kept_mu_);

  PlainMutex mu_;
  std::shared_ptr<const cuda::Driver> driver_ ABSL_GUARDED_BY(mu_);
  std::optional<std::vector<std::string>> uuids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::uint64_t, std::uint64_t>,
                      std::weak_ptr<DeviceImport>>
      imports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::internal
