#pragma once

#include <memory>

#include "daemon/pool/pool.h"

namespace memd::broker {

/// Keeps a buffer's allocation out of its pool while copies hold it. The
/// transfer engine writes a copy's destination until its last chunk has
/// left the device, which may be after the buffer was freed (its last lease
/// released): handed back to the pool at once, the bytes could go to the
/// next buffer of the same owner, group and mode, and the late chunks would
/// overwrite it. So a buffer freed while a pin lives parks its allocation
/// in the pin, and the pin gives it to the pool when the last copy lets go.
/// Shared by every copy of the buffer (the buffer itself keeps a weak
/// reference). Park is called at most once, by a holder of a reference, and
/// the destructor runs after every holder let go: no lock is needed. The
/// pool must outlive the pin (the daemon's pools outlive its engine).
class CopyPin {
 public:
  CopyPin() = default;
  CopyPin(const CopyPin&) = delete;
  CopyPin& operator=(const CopyPin&) = delete;
  ~CopyPin();

  // The buffer was freed: `allocation` goes back to `pool` with the last pin.
  void Park(pool::Pool& pool, pool::Allocation allocation);

 private:
  pool::Pool* pool_ = nullptr;
  pool::Allocation parked_;
};

// What a copy end keeps; empty for none.
using CopyPinRef = std::shared_ptr<const CopyPin>;

}  // namespace memd::broker
