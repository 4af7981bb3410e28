#pragma once

#include <sys/mman.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::test {

/// A backend for tests, with what a test needs to see and steer: how many
/// segments (and bytes) were reserved and are alive, how many scrubs and
/// discards ran, and failures injected into the next Reserve calls. Serves
/// "host" and "device:0" (a fake device). Real mode backs segments with host
/// memory, so descriptors work; hollow mode backs them with nothing (Export
/// fails), so that tests can reserve terabytes. With device IPC handles,
/// device:0 segments export a pretend legacy CUDA IPC handle (bytes, no
/// descriptor) that "opens" while the segment lives, as CUDA's does while
/// its allocation is not freed. Thread-safe.
class FakeBackend : public backend::Backend {
 public:
  enum class Memory { kReal, kHollow };
  explicit FakeBackend(Memory memory = Memory::kReal) : memory_(memory) {}

  std::string_view name() const override { return "fake"; }
  std::vector<Location> locations() const override {
    return {Location::Host(), Location::Device(0)};
  }
  std::uint64_t alignment(const Location& location) const override {
    if (location.kind == Location::Kind::kDevice && device_alignment_ != 0) {
      return device_alignment_;
    }
    return host_.alignment(Location::Host());
  }
  // Gives device:0 a granularity of its own, like a GPU's 2 MiB (0: the
  // page size). Before any pool is made for it.
  void set_device_alignment(std::uint64_t bytes) { device_alignment_ = bytes; }
  // Segment::Memory() fails UNIMPLEMENTED, as a backend whose memory memd
  // cannot copy.
  void set_memory_reachable(bool reachable) { memory_reachable_ = reachable; }
  // Device:0 segments reserved from now on export kCudaIpc handles.
  void set_device_ipc_handles(bool ipc) { device_ipc_ = ipc; }

  // Whether a kCudaIpc handle this backend exported would still open: its
  // segment has not been destroyed (cuMemFree'd).
  bool IpcHandleOpens(const std::string& handle) const {
    absl::MutexLock lock(&mu_);
    return live_ipc_.contains(handle);
  }

  absl::StatusOr<std::unique_ptr<backend::Segment>> Reserve(
      const Location& location, std::uint64_t bytes) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failures_.empty()) {
        absl::Status failure = failures_.front();
        failures_.erase(failures_.begin());
        return failure;
      }
    }
    std::unique_ptr<backend::Segment> inner;
    if (memory_ == Memory::kReal) {
      auto segment = host_.Reserve(Location::Host(), bytes);
      if (!segment.ok()) return segment.status();
      inner = std::move(*segment);
    }
    const int serial = ++reserved_;
    std::string ipc_handle;
    if (device_ipc_ && location.kind == Location::Kind::kDevice) {
      ipc_handle = absl::StrCat("fake-ipc-handle:", serial);
    }
    return std::unique_ptr<backend::Segment>(
        new CountedSegment(std::move(inner), bytes, std::move(ipc_handle), *this));
  }

  // The next Reserve calls fail with these statuses, in order.
  void FailNextReserve(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(std::move(status));
  }

  int reserved() const { return reserved_.load(); }
  int alive() const { return alive_.load(); }
  std::uint64_t alive_bytes() const { return alive_bytes_.load(); }
  int scrubs() const { return scrubs_.load(); }
  int discards() const { return discards_.load(); }

 private:
  class CountedSegment : public backend::Segment {
   public:
    // `ipc_handle`: empty, or the pretend CUipcMemHandle it exports.
    CountedSegment(std::unique_ptr<backend::Segment> inner, std::uint64_t size,
                   std::string ipc_handle, FakeBackend& backend)
        : inner_(std::move(inner)),
          size_(size),
          ipc_handle_(std::move(ipc_handle)),
          backend_(backend) {
      ++backend_.alive_;
      backend_.alive_bytes_ += size_;
      if (!ipc_handle_.empty()) {
        absl::MutexLock lock(&backend_.mu_);
        backend_.live_ipc_.insert(ipc_handle_);
      }
    }
    ~CountedSegment() override {
      if (map_ != nullptr) ::munmap(map_, size_);
      --backend_.alive_;
      backend_.alive_bytes_ -= size_;
      if (!ipc_handle_.empty()) {
        absl::MutexLock lock(&backend_.mu_);
        backend_.live_ipc_.erase(ipc_handle_);
      }
    }
    std::uint64_t size() const override { return size_; }
    absl::StatusOr<backend::ExportedHandle> Export(backend::Access access) const override {
      if (!ipc_handle_.empty()) {
        return backend::ExportedHandle{backend::HandleType::kCudaIpc, -1, ipc_handle_};
      }
      if (inner_ == nullptr) return absl::InternalError("a hollow segment has no memory");
      return inner_->Export(access);
    }
    // The inner memfd's, as host memory's; none for a pretend IPC handle
    // (legacy IPC memory cannot outlive memd) or a hollow segment.
    int DurableFd() const override {
      return ipc_handle_.empty() && inner_ != nullptr ? inner_->DurableFd() : -1;
    }
    absl::Status Scrub() override {
      ++backend_.scrubs_;
      return inner_ == nullptr ? absl::OkStatus() : inner_->Scrub();
    }
    void Discard() override {
      ++backend_.discards_;
      if (inner_ != nullptr) inner_->Discard();
    }
    // Host memory for both locations (device:0 is pretend): the daemon's
    // own mapping, which the transfer engine copies with the CPU. Mapped
    // here when the host segment has none of its own.
    absl::StatusOr<backend::SegmentMemory> Memory() const override {
      if (inner_ == nullptr) return absl::UnimplementedError("a hollow segment has no memory");
      if (!backend_.memory_reachable_) {
        return absl::UnimplementedError("this fake backend's memory is out of memd's reach");
      }
      if (auto own = inner_->Memory(); own.ok()) return own;
      absl::MutexLock lock(&map_mu_);
      if (map_ == nullptr) {
        auto handle = inner_->Export(backend::Access::kReadWrite);
        if (!handle.ok()) return handle.status();
        void* map = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, handle->fd, 0);
        if (map == MAP_FAILED) return absl::InternalError("mmap of a fake segment failed");
        map_ = map;
      }
      return backend::SegmentMemory{static_cast<std::byte*>(map_)};
    }

   private:
    std::unique_ptr<backend::Segment> inner_;
    const std::uint64_t size_;
    const std::string ipc_handle_;
    FakeBackend& backend_;
    mutable absl::Mutex map_mu_;
    mutable void* map_ ABSL_GUARDED_BY(map_mu_) = nullptr;  // Memory()'s own mapping.
  };

  const Memory memory_;
  std::uint64_t device_alignment_ = 0;
  std::atomic<bool> device_ipc_{false};
  std::atomic<bool> memory_reachable_{true};
  backend::HostBackend host_;
  std::atomic<int> reserved_{0};
  std::atomic<int> alive_{0};
  std::atomic<std::uint64_t> alive_bytes_{0};
  std::atomic<int> scrubs_{0};
  std::atomic<int> discards_{0};
  mutable absl::Mutex mu_;
  std::vector<absl::Status> failures_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> live_ipc_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::test
