#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "daemon/backend/backend.h"

namespace memd::backend {

/// Host shared memory: every segment is a memfd, committed with fallocate and
/// sealed against shrinking and growing (and against new seals) before any
/// descriptor can leave the daemon, so no client can truncate memory under
/// another. Serves "host" and "pinned" (the same memory, mapped and mlock'ed
/// by the daemon while the segment lives). No memfd has a name in /dev/shm.
/// Thread-safe.
class HostBackend : public Backend {
 public:
  HostBackend();

  std::string_view name() const override { return "host"; }
  std::vector<Location> locations() const override;
  std::uint64_t alignment(const Location& location) const override;

  // Errors: INVALID_ARGUMENT (device location, size 0 or unaligned),
  // RESOURCE_EXHAUSTED (memfd/fallocate out of memory, mlock limit),
  // INTERNAL (unexpected system call failure).
  absl::StatusOr<std::unique_ptr<Segment>> Reserve(
      const Location& location, std::uint64_t bytes) override;
  // Reserve with the memfd's pages placed on `numa_node` (MemfdSegment::
  // Create). Errors: Reserve's.
  absl::StatusOr<std::unique_ptr<Segment>> ReserveOnNode(const Location& location,
                                                         std::uint64_t bytes,
                                                         int numa_node) override;
  // Takes back a segment's memfd (MemfdSegment::Adopt checks it); pinned
  // memory is locked again as Reserve locks it. Errors: INVALID_ARGUMENT
  // (device location, size 0 or unaligned, not such a memfd),
  // RESOURCE_EXHAUSTED (mlock limit), INTERNAL.
  absl::StatusOr<std::unique_ptr<Segment>> Adopt(const Location& location,
                                                 std::uint64_t bytes, UniqueFd fd) override;

 private:
  // INVALID_ARGUMENT for a device location or a size Reserve refuses.
  absl::Status CheckRequest(const Location& location, std::uint64_t bytes) const;

  std::uint64_t page_size_;
};

}  // namespace memd::backend
