#pragma once

#include <atomic>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::testing {

/// A backend for tests, with what a test needs to see and steer: how many
/// segments (and bytes) were reserved and are alive, how many scrubs and
/// discards ran, and failures injected into the next Reserve calls. Serves
/// "host" and "device:0" (a fake device). Real mode backs segments with host
/// memory, so descriptors work; hollow mode backs them with nothing (Export
/// fails), so that tests can reserve terabytes. Thread-safe.
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
    ++reserved_;
    return std::unique_ptr<backend::Segment>(
        new CountedSegment(std::move(inner), bytes, *this));
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
    CountedSegment(std::unique_ptr<backend::Segment> inner, std::uint64_t size,
                   FakeBackend& backend)
        : inner_(std::move(inner)), size_(size), backend_(backend) {
      ++backend_.alive_;
      backend_.alive_bytes_ += size_;
    }
    ~CountedSegment() override {
      --backend_.alive_;
      backend_.alive_bytes_ -= size_;
    }
    std::uint64_t size() const override { return size_; }
    absl::StatusOr<backend::ExportedHandle> Export(backend::Access access) const override {
      if (inner_ == nullptr) return absl::InternalError("a hollow segment has no memory");
      return inner_->Export(access);
    }
    absl::Status Scrub() override {
      ++backend_.scrubs_;
      return inner_ == nullptr ? absl::OkStatus() : inner_->Scrub();
    }
    void Discard() override {
      ++backend_.discards_;
      if (inner_ != nullptr) inner_->Discard();
    }

   private:
    std::unique_ptr<backend::Segment> inner_;
    const std::uint64_t size_;
    FakeBackend& backend_;
  };

  const Memory memory_;
  std::uint64_t device_alignment_ = 0;
  backend::HostBackend host_;
  std::atomic<int> reserved_{0};
  std::atomic<int> alive_{0};
  std::atomic<std::uint64_t> alive_bytes_{0};
  std::atomic<int> scrubs_{0};
  std::atomic<int> discards_{0};
  absl::Mutex mu_;
  std::vector<absl::Status> failures_;
};

}  // namespace memd::testing
