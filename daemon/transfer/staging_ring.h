#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/backend/copy_device.h"

namespace memd::transfer {

/// One device's pinned staging slots, carved from one allocation made at
/// start (pinning runs at 1-2 GB/s: never per transfer). A slot is taken
/// for a chunk and given back only once the device is done with it (its
/// marker reached). The memory belongs to the CopyDevice. Not thread-safe:
/// its lane's progress thread alone uses it.
class StagingRing {
 public:
  // Errors: the device's (RESOURCE_EXHAUSTED for pinned memory).
  static absl::StatusOr<StagingRing> Allocate(backend::CopyDevice& device, int slots,
                                              std::uint64_t slot_bytes);

  // A free slot's index, or -1 when every slot is in use.
  int Acquire();
  void Release(int slot);
  std::byte* data(int slot) const { return memory_.data() + slot * slot_bytes_; }

  int size() const { return static_cast<int>(in_use_.size()); }
  int free() const { return static_cast<int>(free_.size()); }

 private:
  StagingRing(std::span<std::byte> memory, int slots, std::uint64_t slot_bytes);

  std::span<std::byte> memory_;
  std::uint64_t slot_bytes_ = 0;
  std::vector<int> free_;
  std::vector<bool> in_use_;
};

}  // namespace memd::transfer
