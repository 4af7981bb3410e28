#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pool/pool.h"

namespace memd::broker {

/// What copies hold of one buffer: a count of the copy ends that reach it
/// (claims) and of those that may still write it (writers).
///
/// The transfer engine reads a copy's source and writes its destination
/// until the copy's last chunk has left the device, which may be after the
/// buffer was freed (its last lease released, its name gone). Handed back
/// to its pool at once, the bytes could go to the next buffer of the same
/// domain and late chunks would overwrite it; uncharged, a 1-byte copy
/// could keep an allocation of any size outside every quota. So the broker
/// keeps a freed buffer, its allocation and its charges while claims live,
/// and the pin tells it (`let_go`) when the last claim is gone. Writers
/// keep a buffer from being sealed: a seal promises that no byte changes.
///
/// Owned by its buffer and shared by every claim on it. Thread-safe: the
/// counts are atomic; claims are taken under the broker's mutex and given
/// back on any thread, but never under the broker's mutex (the last one
/// runs `let_go`, which takes it). `let_go` runs under the pin's own mutex,
/// which the broker never takes while it holds its own.
class CopyPin {
 public:
  explicit CopyPin(std::function<void()> let_go) : let_go_(std::move(let_go)) {}
  CopyPin(const CopyPin&) = delete;
  CopyPin& operator=(const CopyPin&) = delete;
  ~CopyPin();

  // Copy ends that reach the buffer, and those of them that may still write
  // it. Exact under the broker's mutex for the question "are there none":
  // nothing is added without it.
  int claims() const { return claims_.load(); }
  int writers() const { return writers_.load(); }

  // The broker goes before the claims: no more `let_go`; `allocation` goes
  // back to `pool` with the last claim (at once when none is left).
  void Detach(pool::Pool& pool, pool::Allocation allocation);

 private:
  friend class CopyClaim;
  void Add(bool writes);
  void WriteDone() { writers_.fetch_sub(1); }
  void Drop();

  std::atomic<int> claims_{0};
  std::atomic<int> writers_{0};
  absl::Mutex mu_;
  std::function<void()> let_go_ ABSL_GUARDED_BY(mu_);
  pool::Pool* pool_ ABSL_GUARDED_BY(mu_) = nullptr;
  pool::Allocation parked_ ABSL_GUARDED_BY(mu_);
};

/// One end of one copy: a claim on its buffer's pin, and for a destination
/// a place among the writers until Written() (the engine calls it when the
/// copy's last chunk has left the device) or until the claim goes.
/// Thread-safe.
class CopyClaim {
 public:
  CopyClaim(std::shared_ptr<CopyPin> pin, bool writes);
  CopyClaim(const CopyClaim&) = delete;
  CopyClaim& operator=(const CopyClaim&) = delete;
  ~CopyClaim();

  // The copy writes no more. Idempotent.
  void Written() const;
  const CopyPin& pin() const { return *pin_; }

 private:
  const std::shared_ptr<CopyPin> pin_;
  mutable std::atomic<bool> writing_;
};

// What a copy end keeps; empty for none.
using CopyClaimRef = std::shared_ptr<const CopyClaim>;

}  // namespace memd::broker
