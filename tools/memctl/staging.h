#pragma once

// memctl's staging buffer: where a device buffer's bytes stop on their way
// from a file (put) or to one (get). memctl's reader threads fill some
// slices while the daemon's transfer engine copies the slices read before
// to the GPU, so the file is never all in memory and reading overlaps the
// copying.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "memd/client.h"

namespace memd::memctl {

/// An ephemeral, never sealed buffer of memctl's own, cut into equal slices
/// (page aligned in memctl's mapping, as O_DIRECT reads need). Releasing it
/// removes it: nobody else holds a lease, and a buffer that loses its last
/// lease unsealed is gone, also when memctl is killed. Move-only; not
/// thread-safe.
class Staging {
 public:
  // 256 MiB at most: half the slices queued as copies with the daemon (a
  // 32 MiB copy lasts about 0.6 ms at 55 GB/s, several times memctl's
  // calls per copy), the other half being read, 4 pieces of 8 MiB each for
  // the reader threads (docs/benchmarks.md, "A file into a device buffer").
  static constexpr std::uint64_t kSliceBytes = std::uint64_t{32} << 20;
  static constexpr int kSlices = 8;

  // A staging buffer for a copy of `total` bytes (> 0): kSlices slices of
  // kSliceBytes, fewer and smaller for smaller copies. On "pinned" where
  // the daemon has that pool (the engine then copies from it with no
  // staging of its own), else, or when pinned memory is short, on "host".
  // Errors: Client::Create's for host memory, naming the step "staging".
  static absl::StatusOr<Staging> Create(Client& client, std::uint64_t total);

  int slices() const { return slices_; }
  std::uint64_t slice_bytes() const { return slice_bytes_; }
  const std::string& location() const { return buffer_.info().location; }

  // Slice `index`'s first `length` bytes (at most slice_bytes()).
  std::span<std::byte> Slice(int index, std::uint64_t length);
  Region SliceRegion(int index, std::uint64_t length) const;

 private:
  Staging(Buffer buffer, std::uint64_t slice_bytes, int slices)
      : buffer_(std::move(buffer)), slice_bytes_(slice_bytes), slices_(slices) {}

  Buffer buffer_;
  std::uint64_t slice_bytes_ = 0;
  int slices_ = 0;
};

}  // namespace memd::memctl
