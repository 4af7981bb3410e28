#pragma once

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "daemon/backend/backend.h"

namespace memd::backend {

/// One sealed memfd of fixed size. Owns the descriptor and, when pinned, the
/// daemon's locked mapping of it. Thread-safe.
class MemfdSegment : public Segment {
 public:
  // Creates, commits (fallocate) and seals a memfd of `bytes`; `pin` maps it
  // and locks it in RAM. Errors: RESOURCE_EXHAUSTED (no memory, RLIMIT_MEMLOCK),
  // INTERNAL.
  static absl::StatusOr<std::unique_ptr<MemfdSegment>> Create(std::uint64_t bytes,
                                                              bool pin);
  ~MemfdSegment() override;

  std::uint64_t size() const override { return size_; }
  HandleType handle_type() const override { return HandleType::kHostMemfd; }
  absl::StatusOr<UniqueFd> Export(Access access) override;

 private:
  MemfdSegment(UniqueFd fd, std::uint64_t size) : fd_(std::move(fd)), size_(size) {}

  const UniqueFd fd_;
  const std::uint64_t size_;
  void* pinned_ = nullptr;  // Set once in Create.
  absl::Mutex mu_;
  // A read-only open file description of the same memfd, made on first use:
  // descriptors dup'ed from it refuse PROT_WRITE mappings.
  UniqueFd read_only_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::backend
