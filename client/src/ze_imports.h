#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/src/device_imports.h"
#include "common/plain_mutex.h"
#include "common/unique_fd.h"
#include "common/ze/driver.h"

namespace memd::internal {

/// A Level Zero segment opened with zeMemOpenIpcHandle in this process.
/// Owns the opened range and the descriptor it came through (kept open
/// until zeMemCloseIpcHandle: the driver may still use it); shares the
/// loader.
struct ZeImport : DeviceImport {
  ~ZeImport() override;

  std::shared_ptr<const ze::Loader> loader;
  ze_context_handle_t context = nullptr;  // The one it was opened in.
  UniqueFd fd;
};

// What a lease says about the Level Zero memory to open.
struct ZeHandle {
  std::uint64_t segment_id = 0;
  std::uint64_t segment_bytes = 0;
  int device = 0;           // memd's ordinal (for messages)...
  std::string device_uuid;  // ...and the GPU's UUID, which finds it here.
  std::string ipc_handle;   // The daemon's ze_ipc_mem_handle_t.
  UniqueFd fd;              // The dma-buf descriptor it names.
};

/// This process's opens of Level Zero segments, one per exported segment
/// and shared by every Buffer in it; the loader is loaded on first use.
/// Opens in the context the application gave (ConnectOptions), else in the
/// one libmemd made on the GPU's driver. Thread-safe.
class ZeImports {
 public:
  // `context`: a ze_context_handle_t of the application's, or nullptr.
  explicit ZeImports(void* context) : app_context_(static_cast<ze_context_handle_t>(context)) {}

  // The open of `handle`'s segment, made now or shared. Errors:
  // UNAVAILABLE (no Level Zero loader or driver here), FAILED_PRECONDITION
  // (this process does not see the GPU), INVALID_ARGUMENT (a malformed
  // handle), the driver's.
  absl::StatusOr<std::shared_ptr<ZeImport>> Import(std::uint64_t generation, ZeHandle handle);

  // The context buffers are opened in (loading the loader if needed).
  // Errors: as Import's.
  absl::StatusOr<void*> Context(const std::string& device_uuid);

 private:
  absl::StatusOr<std::shared_ptr<const ze::Loader>> LoaderLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::pair<int, const ze::Gpu*>> FindLocked(const std::string& uuid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ze_context_handle_t app_context_;
  PlainMutex mu_;
  std::shared_ptr<const ze::Loader> loader_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::uint64_t, std::uint64_t>, std::weak_ptr<ZeImport>>
      imports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::internal
