#include "daemon/pool/size_classes.h"

#include <algorithm>

#include "common/bytes.h"

namespace memd::pool {

SizeClasses::SizeClasses(std::uint64_t alignment, std::uint64_t small_max) {
  const std::uint64_t top = AlignUp(std::max<std::uint64_t>(small_max, 1), alignment);
  std::uint64_t size = alignment;
  for (; size <= top && size <= 16 * alignment; size += alignment) {
    sizes_.push_back(size);
  }
  for (std::uint64_t base = 16 * alignment; base < top; base *= 2) {
    // Eight steps of base/8 from base to 2*base; base/8 >= 2 alignments.
    for (std::uint64_t step = 1; step <= 8; ++step) {
      size = base + step * (base / 8);
      if (size > top) break;
      sizes_.push_back(size);
    }
  }
  if (sizes_.empty() || sizes_.back() != top) sizes_.push_back(top);
  while ((std::uint64_t{1} << alignment_shift_) < alignment) ++alignment_shift_;
  // Class i holds (i + 1) alignment units while the classes step by one.
  std::size_t direct = 0;
  while (direct < sizes_.size() && sizes_[direct] == (direct + 1) * alignment) {
    ++direct;
  }
  direct_max_ = direct * alignment;
}

std::size_t SizeClasses::Search(std::uint64_t bytes) const {
  return static_cast<std::size_t>(
      std::lower_bound(sizes_.begin(), sizes_.end(), bytes) - sizes_.begin());
}

}  // namespace memd::pool
