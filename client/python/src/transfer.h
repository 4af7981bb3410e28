#pragma once

#include <cstdint>
#include <mutex>

#include "memd/client.h"

namespace memd::python {

/// The Python memd.Transfer: owns one memd::Transfer handle. Dropping it
/// leaves the copy running, as in libmemd. Thread-safe: the handle (not
/// thread-safe itself) is used under mu_, taken with the GIL released.
/// Errors: wait() raises how the copy ended (CancelledError,
/// DeadlineExceededError, the driver's error...).
class PyTransfer {
 public:
  explicit PyTransfer(Transfer transfer)
      : transfer_(std::move(transfer)), id_(transfer_.id()) {}
  std::uint64_t id() const { return id_; }
  Transfer& transfer() { return transfer_; }
  std::mutex& mutex() { return mu_; }

 private:
  std::mutex mu_;
  Transfer transfer_;
  const std::uint64_t id_;
};

}  // namespace memd::python
