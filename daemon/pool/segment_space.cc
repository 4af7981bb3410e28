#include "daemon/pool/segment_space.h"

namespace memd::pool {

void SegmentSpace::Add(PoolSegment* segment) {
  by_seq_[segment->seq] = segment;
  segment->blocks.clear();
  InsertFree(segment, 0, segment->size);
}

void SegmentSpace::AddCarved(
    PoolSegment* segment, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& used) {
  by_seq_[segment->seq] = segment;
  segment->blocks.clear();
  std::uint64_t free_from = 0;
  for (const auto& [offset, bytes] : used) {
    if (offset > free_from) InsertFree(segment, free_from, offset - free_from);
    segment->blocks[offset] = {bytes, false};
    free_from = offset + bytes;
  }
  if (free_from < segment->size) InsertFree(segment, free_from, segment->size - free_from);
}

void SegmentSpace::Remove(PoolSegment* segment) {
  EraseFree(segment, 0, segment->size);
  segment->blocks.clear();
  by_seq_.erase(segment->seq);
}

bool SegmentSpace::AllFree(const PoolSegment& segment) {
  return segment.blocks.size() == 1 && segment.blocks.begin()->second.second;
}

std::optional<Placement> SegmentSpace::Take(std::uint64_t bytes,
                                            std::uint64_t max_block) {
  auto fit = by_size_.lower_bound(FreeKey{bytes, 0, 0});
  if (fit == by_size_.end() || fit->size > max_block) return std::nullopt;
  const FreeKey key = *fit;
  PoolSegment* segment = by_seq_.at(key.seq);
  EraseFree(segment, key.offset, key.size);
  segment->blocks[key.offset] = {bytes, false};
  if (key.size > bytes) InsertFree(segment, key.offset + bytes, key.size - bytes);
  return Placement{segment, key.offset};
}

void SegmentSpace::Give(PoolSegment* segment, std::uint64_t offset,
                        std::uint64_t bytes) {
  auto& blocks = segment->blocks;
  // Read both neighbours before changing anything: btree erasure
  // invalidates iterators.
  auto block = blocks.find(offset);
  std::optional<std::pair<std::uint64_t, std::uint64_t>> after, before;
  if (auto next = std::next(block); next != blocks.end() && next->second.second) {
    after = {next->first, next->second.first};
  }
  if (block != blocks.begin()) {
    auto previous = std::prev(block);
    if (previous->second.second) before = {previous->first, previous->second.first};
  }
  blocks.erase(block);
  std::uint64_t start = offset;
  std::uint64_t size = bytes;
  if (after) {
    EraseFree(segment, after->first, after->second);
    size += after->second;
  }
  if (before) {
    EraseFree(segment, before->first, before->second);
    start = before->first;
    size += before->second;
  }
  InsertFree(segment, start, size);
}

std::uint64_t SegmentSpace::largest_free() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->size;
}

void SegmentSpace::InsertFree(PoolSegment* segment, std::uint64_t offset,
                              std::uint64_t size) {
  segment->blocks[offset] = {size, true};
  by_size_.insert(FreeKey{size, segment->seq, offset});
  free_bytes_ += size;
}

void SegmentSpace::EraseFree(PoolSegment* segment, std::uint64_t offset,
                             std::uint64_t size) {
  segment->blocks.erase(offset);
  by_size_.erase(FreeKey{size, segment->seq, offset});
  free_bytes_ -= size;
}

}  // namespace memd::pool
