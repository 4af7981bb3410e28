#pragma once

#include "absl/status/status.h"
#include "common/cuda/driver.h"

namespace memd::cuda {

/// Makes a context current on this thread for a scope and restores the one
/// before. Borrows the driver. Not thread-safe (one thread's state).
class ScopedContext {
 public:
  ScopedContext(const Driver& driver, CUcontext context) : driver_(driver) {
    driver_.api().CtxGetCurrent(&previous_);
    status_ = driver_.Check(driver_.api().CtxSetCurrent(context), "cuCtxSetCurrent");
  }
  ~ScopedContext() { driver_.api().CtxSetCurrent(previous_); }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  const Driver& driver_;
  CUcontext previous_ = nullptr;
  absl::Status status_;
};

}  // namespace memd::cuda
