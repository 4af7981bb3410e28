#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/location.h"
#include "common/unique_fd.h"

namespace memd::backend {

// What a client may do with an exported handle.
enum class Access { kRead, kReadWrite };

// How a client imports an exported handle.
enum class HandleType { kHostMemfd };

/// Memory reserved from a backend in one piece: the unit the backend exports
/// and the pool carves. Owns the memory; destroying the segment gives it back
/// (memory a client still maps stays valid for that client until it unmaps).
/// Thread-safe: Export may run concurrently from several threads.
class Segment {
 public:
  virtual ~Segment() = default;

  virtual std::uint64_t size() const = 0;
  virtual HandleType handle_type() const = 0;

  // The descriptor to send a client, owned by the segment and valid while
  // it lives (SCM_RIGHTS gives the client its own reference). kRead
  // descriptors cannot be mapped writable. Errors: INTERNAL.
  virtual absl::StatusOr<int> Export(Access access) const = 0;

  // Zeroes every byte, for memory that changes security domain. Errors:
  // UNIMPLEMENTED where the backend cannot (the pool then does not move the
  // segment), RESOURCE_EXHAUSTED, INTERNAL.
  virtual absl::Status Scrub() {
    return absl::UnimplementedError("this backend cannot scrub segments");
  }
};

/// Reserves segments at the locations a node offers. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;

  // "host", "cuda", "level_zero".
  virtual std::string_view name() const = 0;

  // Locations this backend serves on this node.
  virtual std::vector<Location> locations() const = 0;

  // Segment sizes and offsets at `location` are multiples of this (a power
  // of two).
  virtual std::uint64_t alignment(const Location& location) const = 0;

  // Reserves `bytes` (a multiple of alignment()) at `location`; the memory
  // is committed, so running out is an error here and never a fault later.
  // Errors: INVALID_ARGUMENT (location not served, bad size),
  // RESOURCE_EXHAUSTED (out of memory, locked-memory limit), INTERNAL.
  virtual absl::StatusOr<std::unique_ptr<Segment>> Reserve(
      const Location& location, std::uint64_t bytes) = 0;
};

}  // namespace memd::backend
