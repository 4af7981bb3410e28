#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/backend/backend.h"

namespace memd::test {

/// A backend that passes every call to another one, except that it can
/// hold the next Reserve in flight: the call blocks inside the backend
/// until the test lets it go, as a slow allocation (a large fallocate, a
/// GPU's page zeroing) would, so that a test can act while an allocation
/// runs, without sleeping. Borrows `inner`. Thread-safe.
class GatedBackend : public backend::Backend {
 public:
  explicit GatedBackend(backend::Backend& inner) : inner_(inner) {}
  ~GatedBackend() override { Open(); }

  // The next Reserve (only that one) blocks until Open.
  void HoldNextReserve() {
    absl::MutexLock lock(&mu_);
    armed_ = true;
    open_ = false;
  }
  // Returns once the held Reserve has come and blocks.
  void AwaitHeld() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&holding_));
  }
  // Lets the held Reserve (or the next, if it has not come yet) go on.
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Reserves that reached this backend, held or not.
  int reserves() const {
    absl::MutexLock lock(&mu_);
    return reserves_;
  }

  std::string_view name() const override { return inner_.name(); }
  std::vector<Location> locations() const override { return inner_.locations(); }
  std::vector<backend::DeviceInfo> devices() const override { return inner_.devices(); }
  std::uint64_t alignment(const Location& location) const override {
    return inner_.alignment(location);
  }
  absl::StatusOr<std::unique_ptr<backend::Segment>> Reserve(const Location& location,
                                                            std::uint64_t bytes) override {
    Gate();
    return inner_.Reserve(location, bytes);
  }
  absl::StatusOr<std::unique_ptr<backend::Segment>> ReserveOnNode(const Location& location,
                                                                  std::uint64_t bytes,
                                                                  int numa_node) override {
    Gate();
    return inner_.ReserveOnNode(location, bytes, numa_node);
  }

 private:
  void Gate() {
    absl::MutexLock lock(&mu_);
    ++reserves_;
    if (!armed_) return;
    armed_ = false;
    holding_ = true;
    mu_.Await(absl::Condition(&open_));
    holding_ = false;
  }

  backend::Backend& inner_;
  mutable absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int reserves_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace memd::test
