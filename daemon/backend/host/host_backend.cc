#include "daemon/backend/host/host_backend.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "daemon/backend/host/memfd_segment.h"

namespace memd::backend {

HostBackend::HostBackend()
    : page_size_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {}

std::vector<Location> HostBackend::locations() const {
  return {Location::Host(), Location::Pinned()};
}

std::uint64_t HostBackend::alignment(const Location&) const { return page_size_; }

absl::Status HostBackend::CheckRequest(const Location& location,
                                       std::uint64_t bytes) const {
  if (location.kind == Location::Kind::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the host backend has no device memory (asked for ",
        location.ToString(), ")"));
  }
  if (bytes == 0 || bytes % page_size_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment size ", bytes, " is not a positive multiple of the page size ",
        page_size_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Segment>> HostBackend::Adopt(const Location& location,
                                                            std::uint64_t bytes,
                                                            UniqueFd fd) {
  if (absl::Status request = CheckRequest(location, bytes); !request.ok()) return request;
  auto segment = MemfdSegment::Adopt(std::move(fd), bytes,
                                     location.kind == Location::Kind::kPinned);
  if (!segment.ok()) return segment.status();
  return std::unique_ptr<Segment>(std::move(*segment));
}

absl::StatusOr<std::unique_ptr<Segment>> HostBackend::Reserve(
    const Location& location, std::uint64_t bytes) {
  return ReserveOnNode(location, bytes, -1);
}

absl::StatusOr<std::unique_ptr<Segment>> HostBackend::ReserveOnNode(const Location& location,
                                                                    std::uint64_t bytes,
                                                                    int numa_node) {
  if (absl::Status request = CheckRequest(location, bytes); !request.ok()) return request;
  auto segment = MemfdSegment::Create(bytes, location.kind == Location::Kind::kPinned,
                                      numa_node);
  if (!segment.ok()) return segment.status();
  return std::unique_ptr<Segment>(std::move(*segment));
}

}  // namespace memd::backend
