#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "daemon/backend/backend.h"
#include "daemon/backend/level_zero/ze_backend.h"

namespace memd::backend {

/// Both kinds of GPU on one node: CUDA GPUs are device:0..k-1 (and serve
/// host and pinned memory), Level Zero GPUs device:k and up. Routes each
/// call to the backend that owns the location. Owns both. Thread-safe, as
/// they are.
class CombinedBackend : public Backend {
 public:
  // `level_zero` numbers its GPUs from cuda's device count.
  CombinedBackend(std::unique_ptr<Backend> cuda, std::unique_ptr<ZeBackend> level_zero)
      : cuda_(std::move(cuda)), level_zero_(std::move(level_zero)) {}

  std::string_view name() const override { return "cuda+level_zero"; }
  std::vector<Location> locations() const override;
  std::vector<DeviceInfo> devices() const override;
  std::uint64_t alignment(const Location& location) const override {
    return Owner(location).alignment(location);
  }
  absl::StatusOr<std::unique_ptr<Segment>> Reserve(const Location& location,
                                                   std::uint64_t bytes) override {
    return Owner(location).Reserve(location, bytes);
  }
  absl::StatusOr<std::unique_ptr<Segment>> ReserveOnNode(const Location& location,
                                                         std::uint64_t bytes,
                                                         int numa_node) override {
    return Owner(location).ReserveOnNode(location, bytes, numa_node);
  }
  absl::StatusOr<std::unique_ptr<Segment>> Adopt(const Location& location,
                                                 std::uint64_t bytes, UniqueFd fd) override {
    return Owner(location).Adopt(location, bytes, std::move(fd));
  }
  // CUDA's, then Level Zero's: each says its own ordinal in the one
  // numbering. Errors: either backend's.
  absl::StatusOr<std::vector<std::unique_ptr<CopyDevice>>> CopyDevices() override;

 private:
  Backend& Owner(const Location& location) const;

  const std::unique_ptr<Backend> cuda_;
  const std::unique_ptr<ZeBackend> level_zero_;
};

}  // namespace memd::backend
