#include "daemon/broker/copy_pin.h"

#include <utility>

namespace memd::broker {

CopyPin::~CopyPin() {
  // Claims hold the pin, so none is left; what Detach parked goes back.
  absl::MutexLock lock(&mu_);
  if (pool_ != nullptr) pool_->Free(std::move(parked_));
}

void CopyPin::Add(bool writes) {
  claims_.fetch_add(1);
  if (writes) writers_.fetch_add(1);
}

void CopyPin::Drop() {
  if (claims_.fetch_sub(1) != 1) return;
  absl::MutexLock lock(&mu_);
  if (let_go_) {
    let_go_();
  } else if (pool_ != nullptr) {
    pool_->Free(std::move(parked_));
    pool_ = nullptr;
  }
}

void CopyPin::Detach(pool::Pool& pool, pool::Allocation allocation) {
  absl::MutexLock lock(&mu_);
  let_go_ = nullptr;
  if (claims_.load() == 0) {
    pool.Free(std::move(allocation));
    return;
  }
  // The last claim frees it (Drop), or the destructor if Drop ran between.
  pool_ = &pool;
  parked_ = std::move(allocation);
}

CopyClaim::CopyClaim(std::shared_ptr<CopyPin> pin, bool writes)
    : pin_(std::move(pin)), writing_(writes) {
  pin_->Add(writes);
}

CopyClaim::~CopyClaim() {
  Written();
  pin_->Drop();
}

void CopyClaim::Written() const {
  if (writing_.exchange(false)) pin_->WriteDone();
}

}  // namespace memd::broker
