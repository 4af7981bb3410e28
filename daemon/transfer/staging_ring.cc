#include "daemon/transfer/staging_ring.h"

#include <cassert>

namespace memd::transfer {

absl::StatusOr<StagingRing> StagingRing::Allocate(backend::CopyDevice& device, int slots,
                                                  std::uint64_t slot_bytes) {
  absl::StatusOr<std::span<std::byte>> memory = device.AllocateStaging(slots * slot_bytes);
  if (!memory.ok()) return memory.status();
  return StagingRing(*memory, slots, slot_bytes);
}

StagingRing::StagingRing(std::span<std::byte> memory, int slots, std::uint64_t slot_bytes)
    : memory_(memory), slot_bytes_(slot_bytes), in_use_(slots, false) {
  // Taken from the back: slot 0 first.
  for (int slot = slots - 1; slot >= 0; --slot) free_.push_back(slot);
}

int StagingRing::Acquire() {
  if (free_.empty()) return -1;
  const int slot = free_.back();
  free_.pop_back();
  in_use_[slot] = true;
  return slot;
}

void StagingRing::Release(int slot) {
  assert(in_use_[slot]);
  in_use_[slot] = false;
  free_.push_back(slot);
}

}  // namespace memd::transfer
