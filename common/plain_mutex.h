// PlainMutex: a mutex without Abseil's debug bookkeeping, for libmemd's hot
// paths.
//
// Debian builds Abseil without NDEBUG, so absl::Mutex::Lock in a process
// that has not turned deadlock detection off looks the mutex up in Abseil's
// process-wide lock graph, under a global lock, on every acquisition. memd
// turns detection off for itself; libmemd cannot for the process that loads
// it, and an Open took seven such locks in the client (issue 28, target 4:
// docs/benchmarks.md). PlainMutex is a std::mutex carrying Abseil's
// thread-safety annotations, so ABSL_GUARDED_BY and friends are still
// checked by the compiler. It has no CondVar, Await or reader mode: a mutex
// that needs those stays an absl::Mutex.
//
// Thread-safe, as a mutex is. Never fails.

#ifndef MEMD_COMMON_PLAIN_MUTEX_H_
#define MEMD_COMMON_PLAIN_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace memd {

class ABSL_LOCKABLE PlainMutex {
 public:
  PlainMutex() = default;
  PlainMutex(const PlainMutex&) = delete;
  PlainMutex& operator=(const PlainMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a PlainMutex for its scope, as absl::MutexLock holds an absl::Mutex.
class ABSL_SCOPED_LOCKABLE PlainMutexLock {
 public:
  explicit PlainMutexLock(PlainMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~PlainMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  PlainMutexLock(const PlainMutexLock&) = delete;
  PlainMutexLock& operator=(const PlainMutexLock&) = delete;

 private:
  PlainMutex* const mu_;
};

}  // namespace memd

#endif  // MEMD_COMMON_PLAIN_MUTEX_H_
