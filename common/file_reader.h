#pragma once

// Reading a file into memory at storage speed: several threads, each taking
// the next large piece and reading it with pread(2), with O_DIRECT where
// asked and the filesystem allows it, and the page cache kept or dropped
// behind the reads. One thread's read from the page cache (a copy to user
// memory) tops out far below a GPU's link; from a device, several large
// reads in flight are what an NVMe drive needs to reach its bandwidth
// (docs/benchmarks.md, "A file into a device buffer").

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace memd {

// Whether a reader goes around the page cache.
enum class DirectIo {
  kOff,      // Through the page cache.
  kPrefer,   // O_DIRECT where the filesystem allows it, else (quietly: the
             // caller reads direct() after) through the page cache.
  kRequire,  // O_DIRECT, or FAILED_PRECONDITION where it is refused.
};

// What a reader leaves in the page cache behind itself.
enum class CachePolicy {
  kKeep,  // What it read stays cached (a second read of the file is a copy).
  kDrop,  // posix_fadvise(POSIX_FADV_DONTNEED) on each piece once read: a
          // file larger than memory does not push everything else out. It
          // drops cached pages of the file whoever read them first, but
          // only clean ones (a file just written stays until written back). The
          // kernel drops a large folio (up to 2 MiB) only when one piece
          // covers all of it: ranges and pieces on 2 MiB boundaries do.
};

// Whether at least 90% of the first 64 MiB of `length` bytes of the file
// at `offset` are in the page cache; false when that cannot be told (a
// file mmap refuses). A reader reads such a range through the cache: O_DIRECT
// would go to the disk for bytes memory has (a cached 2 GiB file went to a
// GPU at 2.0 GB/s with it, 3.4 without: docs/benchmarks.md).
bool FileMostlyCached(int fd, std::uint64_t offset, std::uint64_t length);

struct FileReadOptions {
  // Reader threads: 1..kMaxReadThreads, or 0 for DefaultReadThreads().
  int threads = 0;
  // Bytes one pread asks for at most: a multiple of kDirectAlignment.
  std::uint64_t piece_bytes = std::uint64_t{8} << 20;
  DirectIo direct = DirectIo::kOff;
  CachePolicy cache = CachePolicy::kKeep;
};

/// Reads ranges of one file into memory on a pool of threads: Submit queues
/// a range (cut into pieces of at most piece_bytes that the threads take in
/// order), Wait returns once all of it is in. Owns its threads and, with
/// O_DIRECT, a second descriptor of the file; borrows the caller's `fd`,
/// which it reads with pread only (its position never moves) and which must
/// outlive the reader. Submit and Wait are for one thread at a time (the
/// reader's owner); the pool is internal.
///
/// O_DIRECT needs the file offset, the memory and the length aligned to the
/// filesystem's block: kDirectAlignment (a page) covers every block size in
/// use. A range whose start and memory are aligned is read direct except
/// its unaligned tail, which goes through the page cache on `fd`; any other
/// range goes through the page cache whole, with kRequire too (the caller
/// aligns, or checks direct_bytes()).
class ParallelFileReader {
 public:
  static constexpr std::size_t kDirectAlignment = 4096;
  static constexpr int kMaxReadThreads = 16;

  // One per CPU this process may run on (common/cpus.h), at most 8: page
  // cache copies scale to about that many threads, and a drive's queue is
  // deep enough with 8 large reads in flight.
  static int DefaultReadThreads();

  // Errors: INVALID_ARGUMENT (threads outside 0..kMaxReadThreads, a piece
  // size of 0 or not a multiple of kDirectAlignment, a negative fd);
  // FAILED_PRECONDITION with DirectIo::kRequire when the filesystem refuses
  // O_DIRECT (the message names the file's descriptor and the errno).
  static absl::StatusOr<std::unique_ptr<ParallelFileReader>> Create(
      int fd, const FileReadOptions& options);

  // Stops the threads after the pieces they are reading (a destination
  // must stay valid until the reader is gone or its Wait returned); pieces
  // not started are dropped.
  ~ParallelFileReader();
  ParallelFileReader(const ParallelFileReader&) = delete;
  ParallelFileReader& operator=(const ParallelFileReader&) = delete;

  using Ticket = std::uint64_t;

  // Queues reading into.size() bytes of the file at `offset` into `into`.
  Ticket Submit(std::uint64_t offset, std::span<std::byte> into);

  // Waits for every byte of `ticket` (each ticket once). Errors:
  // OUT_OF_RANGE when the file ends first (the message gives the byte it
  // ended at), FAILED_PRECONDITION when O_DIRECT was required and a read
  // refused it, else the failed pread's errno status. A failed ticket
  // skips its pieces not started.
  absl::Status Wait(Ticket ticket);

  // Whether reads go around the page cache: false with kOff, and with
  // kPrefer once the filesystem refused.
  bool direct() const;
  // Bytes read with O_DIRECT so far (ranges not aligned, and tails, go
  // through the page cache even when direct()).
  std::uint64_t direct_bytes() const { return direct_bytes_.load(); }
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  struct Piece {
    Ticket ticket = 0;
    std::uint64_t offset = 0;
    std::byte* into = nullptr;
    std::size_t length = 0;
    bool aligned = false;  // Start and memory on kDirectAlignment.
  };
  struct Job {
    std::size_t pieces_left = 0;
    absl::Status status;
    // Where the piece whose failure `status` is starts. Of several failed
    // pieces the first in the file wins, whichever thread ended first: a
    // file shorter than the range ends at one byte, not at the start of
    // whichever later piece found nothing.
    std::uint64_t failed_at = 0;
  };

  ParallelFileReader(int fd, UniqueFd direct_fd, const FileReadOptions& options);
  void Serve();
  absl::Status ReadPiece(const Piece& piece);
  absl::StatusOr<std::size_t> Pread(int fd, std::uint64_t offset, std::byte* into,
                                    std::size_t length, bool direct);
  bool UseDirect() const;
  void RefuseDirect();

  const int fd_;
  const UniqueFd direct_fd_;  // Invalid without O_DIRECT.
  const FileReadOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Piece> queue_ ABSL_GUARDED_BY(mu_);
  // Node map: Wait holds a reference to its job while Submit may add more.
  absl::node_hash_map<Ticket, Job> jobs_ ABSL_GUARDED_BY(mu_);
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // kPrefer after a read refused O_DIRECT: the rest goes buffered.
  bool direct_refused_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<std::uint64_t> direct_bytes_{0};
  std::vector<std::thread> threads_;
};

}  // namespace memd
