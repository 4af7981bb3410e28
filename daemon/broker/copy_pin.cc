#include "daemon/broker/copy_pin.h"

#include <utility>

namespace memd::broker {

CopyPin::~CopyPin() {
  if (pool_ != nullptr) pool_->Free(std::move(parked_));
}

void CopyPin::Park(pool::Pool& pool, pool::Allocation allocation) {
  pool_ = &pool;
  parked_ = std::move(allocation);
}

}  // namespace memd::broker
