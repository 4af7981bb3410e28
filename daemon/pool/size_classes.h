#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memd::pool {

/// The block sizes small requests are rounded up to. Steps of one alignment
/// unit up to 16 units, then eight classes per doubling (steps of 1/8), so
/// that rounding wastes at most 1/8 of a block and on average about 1/16,
/// up to `small_max` (rounded up to the alignment), the largest class.
/// Immutable after construction, so thread-safe.
class SizeClasses {
 public:
  // `alignment` is a power of two; `small_max` >= 1.
  SizeClasses(std::uint64_t alignment, std::uint64_t small_max);

  std::size_t count() const { return sizes_.size(); }
  std::uint64_t bytes(std::size_t size_class) const { return sizes_[size_class]; }
  std::uint64_t max_bytes() const { return sizes_.back(); }

  // The smallest class that holds `bytes` (which must be <= max_bytes()).
  std::size_t ClassOf(std::uint64_t bytes) const {
    // The first classes are one alignment unit apart: index directly.
    if (bytes <= direct_max_) {
      return bytes == 0 ? 0 : static_cast<std::size_t>((bytes - 1) >> alignment_shift_);
    }
    return Search(bytes);
  }

 private:
  std::size_t Search(std::uint64_t bytes) const;

  std::vector<std::uint64_t> sizes_;
  std::uint64_t direct_max_ = 0;
  int alignment_shift_ = 0;
};

}  // namespace memd::pool
