#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "daemon/backend/backend.h"

namespace memd::pool {

struct Arena;

/// One backend segment as the pool sees it. The pool owns it (through the
/// arena it serves); the backend memory is shared with allocations that are
/// still being exported. `used` and `touched` change on the allocation hot
/// path (atomics); the rest under the owning arena's mutex.
struct PoolSegment {
  PoolSegment(std::shared_ptr<backend::Segment> backing, std::uint64_t size,
              bool small, std::uint64_t seq)
      : backing(std::move(backing)), size(size), small(small), seq(seq) {}

  const std::shared_ptr<backend::Segment> backing;

  // Whether someone besides the pool holds the backing: a grant still being
  // sent, or a session keeping the segment of a replayable handle it
  // received (ExportedHandle::replayable). Such a segment is not given back
  // (dropping the pool's reference would free nothing, only stop counting
  // it) nor moved to another domain. Once the segment is idle, nobody can
  // take a new reference (references are copied only from live
  // allocations), so the answer can only turn from true to false: reading
  // false under the arena's locks means it stays false.
  bool HeldElsewhere() const { return backing.use_count() > 1; }
  const std::uint64_t size;
  // Small segments are carved into size classes; large ones by best fit.
  const bool small;
  // Creation order: ties in best fit go to the oldest segment, so that a
  // replay is deterministic.
  const std::uint64_t seq;
  // The arena it serves. Changes only while the segment is idle.
  Arena* arena = nullptr;
  // Bytes in live allocations (cached size-class blocks are not live).
  std::atomic<std::uint64_t> used{0};
  // Set by every allocation from the segment; trim clears it when it looks.
  std::atomic<bool> touched{false};
  // When trim first saw it idle and untouched; nullopt while in use.
  std::optional<std::int64_t> idle_since_ns;
  // Every block by offset; true = free. Kept by SegmentSpace.
  absl::btree_map<std::uint64_t, std::pair<std::uint64_t, bool>> blocks;
};

// Where a block was carved.
struct Placement {
  PoolSegment* segment = nullptr;
  std::uint64_t offset = 0;
};

/// A coalescing best-fit allocator over a set of segments: takes the
/// smallest free block that fits (ties: oldest segment, lowest offset) and
/// splits off the rest; merges a freed block with free neighbours at once.
/// Borrows the segments. Not thread-safe (the arena's mutex guards it).
class SegmentSpace {
 public:
  // Adds a segment whose memory is all free.
  void Add(PoolSegment* segment);
  // Adds a segment with blocks in use: `used` is (offset, bytes) of each,
  // sorted by offset, inside the segment and not overlapping (the caller
  // checked). The rest becomes free, each gap one block, as frees would
  // have merged it.
  void AddCarved(PoolSegment* segment,
                 const std::vector<std::pair<std::uint64_t, std::uint64_t>>& used);
  // Removes a segment whose memory is all free (AllFree()).
  void Remove(PoolSegment* segment);

  // The best fit for `bytes` among free blocks of at most `max_block` bytes
  // (larger ones are left whole); nullopt when none fits.
  std::optional<Placement> Take(std::uint64_t bytes,
                                std::uint64_t max_block = ~std::uint64_t{0});
  void Give(PoolSegment* segment, std::uint64_t offset, std::uint64_t bytes);

  static bool AllFree(const PoolSegment& segment);
  std::uint64_t largest_free() const;
  std::uint64_t free_bytes() const { return free_bytes_; }

 private:
  struct FreeKey {
    std::uint64_t size;
    std::uint64_t seq;
    std::uint64_t offset;
    friend auto operator<=>(const FreeKey&, const FreeKey&) = default;
  };

  void InsertFree(PoolSegment* segment, std::uint64_t offset, std::uint64_t size);
  void EraseFree(PoolSegment* segment, std::uint64_t offset, std::uint64_t size);

  absl::btree_set<FreeKey> by_size_;
  absl::flat_hash_map<std::uint64_t, PoolSegment*> by_seq_;
  std::uint64_t free_bytes_ = 0;
};

}  // namespace memd::pool
