#pragma once

#include <fcntl.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/backend/backend.h"

namespace memd::backend {

/// One sealed memfd of fixed size. Owns its descriptors (read-write and
/// read-only) and the daemon's own read-write MAP_SHARED mapping of it, made
/// once at Create (where the transfer engine reaches the bytes: Memory();
/// locked in RAM when pinned). The memfd's inode has no permission bits, so
/// a client cannot reopen it (/proc/self/fd) with more access than its
/// descriptor grants. Immutable after Create, so thread-safe.
class MemfdSegment : public Segment {
 public:
  // Creates, commits (fallocate), seals and maps a memfd of `bytes`; `pin`
  // locks the mapping in RAM. `numa_node` >= 0 sets the memfd's shared
  // memory policy to that node (MPOL_PREFERRED) before fallocate allocates
  // a page, so every page is placed there while the node has room; the
  // policy stays with the memfd (a restarted memd that adopts it, and every
  // client mapping, see the same). Errors: INVALID_ARGUMENT (a node the
  // kernel does not have), RESOURCE_EXHAUSTED (no memory, RLIMIT_MEMLOCK),
  // INTERNAL.
  static absl::StatusOr<std::unique_ptr<MemfdSegment>> Create(std::uint64_t bytes,
                                                              bool pin,
                                                              int numa_node = -1);
  // Takes over a memfd an earlier memd Create'd (its read-write
  // descriptor): checks that it is one, of exactly `bytes`, with Create's
  // seals, commits its pages again (a no-op for those still there) and maps
  // it as Create does. Errors: INVALID_ARGUMENT with the numbers (not a
  // memfd, not read-write, other seals, other size), RESOURCE_EXHAUSTED,
  // INTERNAL.
  static absl::StatusOr<std::unique_ptr<MemfdSegment>> Adopt(UniqueFd fd,
                                                             std::uint64_t bytes,
                                                             bool pin);
  // The seals every segment's memfd carries.
  static constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  ~MemfdSegment() override;

  std::uint64_t size() const override { return size_; }
  absl::StatusOr<ExportedHandle> Export(Access access) const override {
    return ExportedHandle{HandleType::kHostMemfd,
                          access == Access::kReadWrite ? fd_.get() : read_only_.get(),
                          {}};
  }
  // The read-write descriptor, for the daemon's own use (CUDA registration).
  int fd() const { return fd_.get(); }
  // The read-write descriptor too: whoever holds it keeps the pages.
  int DurableFd() const override { return fd_.get(); }

  // The daemon's mapping: host memory, not registered with any driver (a
  // locked page is not one a GPU may DMA to without staging).
  absl::StatusOr<SegmentMemory> Memory() const override {
    return SegmentMemory{.host = static_cast<std::byte*>(mapping_)};
  }
  std::byte* mapping() const { return static_cast<std::byte*>(mapping_); }

  // Punches out every page and commits fresh (zeroed) ones.
  absl::Status Scrub() override;
  // Punches out every page (the descriptors clients hold stay valid).
  void Discard() override;

 private:
  // Create's steps after sealing, shared with Adopt: the read-only reopen,
  // the inode's mode, the mapping and the lock.
  static absl::StatusOr<std::unique_ptr<MemfdSegment>> Finish(UniqueFd fd,
                                                              std::uint64_t bytes,
                                                              bool pin);
  MemfdSegment(UniqueFd fd, UniqueFd read_only, std::uint64_t size)
      : fd_(std::move(fd)), read_only_(std::move(read_only)), size_(size) {}

  const UniqueFd fd_;
  // A read-only open file description of the same memfd: the kernel refuses
  // PROT_WRITE mappings of it.
  const UniqueFd read_only_;
  const std::uint64_t size_;
  void* mapping_ = nullptr;  // Set once in Create.
  bool locked_ = false;      // mlock'ed (pinned).
};

}  // namespace memd::backend
