#include "daemon/transfer/copy_threads.h"

#include <algorithm>
#include <cassert>

#include "daemon/transfer/engine_types.h"

namespace memd::transfer {
namespace {

// Below this, one thread copies: a helper's wake-up costs about as much as
// copying a few hundred KiB.
constexpr std::uint64_t kSplitAbove = std::uint64_t{512} << 10;
// Parts start on cache-line boundaries of the destination.
constexpr std::uint64_t kLine = 64;

// The caller's share, a piece at a time with `between` after each, or at
// once without it.
void CopyOwnShare(Stores stores, std::byte* destination, const std::byte* source,
                  std::uint64_t bytes, const absl::FunctionRef<void()>* between) {
  if (between == nullptr) {
    CopyWith(stores, destination, source, bytes);
    return;
  }
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t piece = std::min(CopyThreads::kCallerPiece, bytes - done);
    CopyWith(stores, destination + done, source + done, piece);
    done += piece;
    (*between)();
  }
}

}  // namespace

CopyThreads::CopyThreads(int threads) {
  const int helpers = std::clamp(threads, 1, kMaxCopyThreads) - 1;
  {
    absl::MutexLock lock(&mu_);
    parts_.resize(helpers + 1);
  }
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this, i] { Help(i); });
}

CopyThreads::~CopyThreads() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
  }
  for (std::thread& helper : helpers_) helper.join();
}

void CopyThreads::Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                       Stores stores) {
  CopyShared(destination, source, bytes, stores, nullptr);
}

void CopyThreads::Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                       Stores stores, absl::FunctionRef<void()> between) {
  CopyShared(destination, source, bytes, stores, &between);
}

void CopyThreads::CopyShared(std::byte* destination, const std::byte* source,
                             std::uint64_t bytes, Stores stores,
                             const absl::FunctionRef<void()>* between) {
  if (helpers_.empty() || bytes < kSplitAbove) {
    CopyOwnShare(stores, destination, source, bytes, between);
    return;
  }
  const std::uint64_t parts = helpers_.size() + 1;
  // A part of every byte: bytes / parts rounded up, then up to a line. (Rounded
  // down first, the shares fell short of `bytes` by up to parts - 1 bytes
  // whenever bytes / parts was a whole number of lines: 1 MiB + 1 on two
  // threads was two shares of 512 KiB, and its last byte was never copied.)
  // The last parts may be shorter, or empty.
  const std::uint64_t share = ((bytes + parts - 1) / parts + kLine - 1) / kLine * kLine;
  Part mine;
  {
    absl::MutexLock lock(&mu_);
    std::uint64_t offset = 0;
    for (std::uint64_t i = 0; i < parts; ++i) {
      const std::uint64_t length = std::min(share, bytes - offset);
      parts_[i] = Part{destination + offset, source + offset, length, stores};
      offset += length;
    }
    assert(offset == bytes);
    mine = parts_[0];
    pending_ = static_cast<int>(helpers_.size());
    ++generation_;
    work_.SignalAll();
  }
  CopyOwnShare(stores, mine.destination, mine.source, mine.bytes, between);
  absl::MutexLock lock(&mu_);
  while (pending_ > 0) done_.Wait(&mu_);
}

void CopyThreads::Help(int index) {
  std::uint64_t seen = 0;
  while (true) {
    Part part;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && generation_ == seen) work_.Wait(&mu_);
      if (stopping_) return;
      seen = generation_;
      part = parts_[index + 1];
    }
    if (part.bytes > 0) CopyWith(part.stores, part.destination, part.source, part.bytes);
    absl::MutexLock lock(&mu_);
    if (--pending_ == 0) done_.Signal();
  }
}

}  // namespace memd::transfer
