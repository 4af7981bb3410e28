#pragma once

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transfer/streaming_copy.h"

namespace memd::transfer {

/// Splits one large memcpy across `threads` CPU threads (1 to
/// kMaxCopyThreads): the caller and threads - 1 helpers started once and
/// reused (one thread's memcpy, 8-9 GB/s, cannot feed a 55 GB/s PCIe Gen5
/// link; seven can). Copies below a threshold run on the
/// caller alone, where waking helpers would cost more than it saves. Owns
/// its helper threads. Copy is called by one thread at a time (the lane
/// that owns it); construction and destruction are not concurrent with it.
class CopyThreads {
 public:
  explicit CopyThreads(int threads);
  ~CopyThreads();
  CopyThreads(const CopyThreads&) = delete;
  CopyThreads& operator=(const CopyThreads&) = delete;

  // memcpy(destination, source, bytes), split; returns when all is copied
  // (with kStreaming, visible to every thread).
  void Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
            Stores stores = Stores::kCached);
  // The same, calling `between` on this thread after each kCallerPiece of
  // its own share while the helpers copy on: the lane lets a critical chunk
  // in there (ChunkPipeline::Stage). `between` must not call Copy.
  void Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
            Stores stores, absl::FunctionRef<void()> between);

  // What the calling thread copies between two calls of `between`: about
  // 30 us at a thread's 8-9 GB/s.
  static constexpr std::uint64_t kCallerPiece = std::uint64_t{256} << 10;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

 private:
  struct Part {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::uint64_t bytes = 0;
    Stores stores = Stores::kCached;
  };
  void Help(int index);
  void CopyShared(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                  Stores stores, const absl::FunctionRef<void()>* between);

  absl::Mutex mu_;
  absl::CondVar work_;
  absl::CondVar done_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);  // parts_[i + 1] is helper i's.
  std::uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_;
};

}  // namespace memd::transfer
