#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/host/host_backend.h"

namespace memd::testing {

/// A backend for tests: real host memory (so descriptors work), plus what a
/// test needs to see and steer — how many segments were reserved and how
/// many are alive, and failures injected into the next Reserve calls.
/// Serves "host" and "device:0" (a fake device, host memory underneath).
/// Thread-safe.
class FakeBackend : public backend::Backend {
 public:
  std::string_view name() const override { return "fake"; }
  std::vector<Location> locations() const override {
    return {Location::Host(), Location::Device(0)};
  }
  std::uint64_t alignment(const Location& location) const override {
    return host_.alignment(Location::Host());
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
    auto segment = host_.Reserve(Location::Host(), bytes);
    if (!segment.ok()) return segment.status();
    ++reserved_;
    return std::unique_ptr<backend::Segment>(
        new CountedSegment(std::move(*segment), alive_));
  }

  // The next Reserve calls fail with these statuses, in order.
  void FailNextReserve(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(std::move(status));
  }

  int reserved() const { return reserved_.load(); }
  int alive() const { return alive_.load(); }

 private:
  class CountedSegment : public backend::Segment {
   public:
    CountedSegment(std::unique_ptr<backend::Segment> inner, std::atomic<int>& alive)
        : inner_(std::move(inner)), alive_(alive) {
      ++alive_;
    }
    ~CountedSegment() override { --alive_; }
    std::uint64_t size() const override { return inner_->size(); }
    backend::HandleType handle_type() const override { return inner_->handle_type(); }
    absl::StatusOr<int> Export(backend::Access access) const override {
      return inner_->Export(access);
    }

   private:
    std::unique_ptr<backend::Segment> inner_;
    std::atomic<int>& alive_;
  };

  backend::HostBackend host_;
  std::atomic<int> reserved_{0};
  std::atomic<int> alive_{0};
  absl::Mutex mu_;
  std::vector<absl::Status> failures_;
};

}  // namespace memd::testing
