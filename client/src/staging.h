#pragma once

// A file into a device buffer through pinned staging: reader threads
// (common/file_reader.h) fill some slices of a staging buffer while the
// daemon's transfer engine copies the slices read before to the GPU, so the
// file is never all in memory and reading overlaps the copying
// (docs/benchmarks.md, "A file into a device buffer"). Buffer::WriteFromFile
// of a device buffer runs this; memctl runs it too (put, cp), with its own
// reader options, progress bar and report, and shares Staging and CopyQueue
// for its other staged copies. Everything here goes through the public
// Client, so the staging buffers are the caller's own: they count against
// the caller's quotas.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_reader.h"
#include "memd/client.h"

namespace memd::internal {

/// An ephemeral, never sealed buffer of the caller's own, cut into equal
/// slices (page aligned in this process's mapping, as O_DIRECT reads need).
/// Releasing it removes it: nobody else holds a lease, and a buffer that
/// loses its last lease unsealed is gone, also when the process is killed.
/// Move-only; not thread-safe.
class Staging {
 public:
  // 256 MiB at most: half the slices queued as copies with the daemon (a
  // 32 MiB copy lasts about 0.6 ms at 55 GB/s, several times the client's
  // calls per copy), the other half being read, 4 pieces of 8 MiB each for
  // the reader threads (docs/benchmarks.md, "A file into a device buffer").
  static constexpr std::uint64_t kSliceBytes = std::uint64_t{32} << 20;
  static constexpr int kSlices = 8;

  // A staging buffer for a copy of `total` bytes (> 0): kSlices slices of
  // kSliceBytes, fewer and smaller for smaller copies, named
  // "<owner>/staging-<session>-<pid>-<n>" (unique on this daemon; the owner
  // and pid tell an operator whose it is). On "pinned" where the daemon has
  // that pool (the engine then copies from it with no staging of its own),
  // else, or when pinned memory is short (this user's quota there), on
  // "host". Errors: Client::Create's for host memory, the message saying
  // how large a staging buffer was asked for.
  static absl::StatusOr<Staging> Create(Client& client, std::uint64_t total,
                                        std::string_view owner);

  int slices() const { return slices_; }
  std::uint64_t slice_bytes() const { return slice_bytes_; }
  const std::string& location() const { return buffer_.info().location; }

  // Slice `index`'s first `length` bytes (at most slice_bytes()).
  std::span<std::byte> Slice(int index, std::uint64_t length);
  Region SliceRegion(int index, std::uint64_t length) const;

 private:
  Staging(Buffer buffer, std::uint64_t slice_bytes, int slices)
      : buffer_(std::move(buffer)), slice_bytes_(slice_bytes), slices_(slices) {}

  Buffer buffer_;
  std::uint64_t slice_bytes_ = 0;
  int slices_ = 0;
};

/// Copies running for one staged copy, oldest first, each on one staging
/// slice. Dropped with copies unfinished (a failure on the way), it cancels
/// them and waits (kDrainWait at most) until they end, so that neither the
/// staging nor the device buffer is written after the caller returned.
/// Not thread-safe.
class CopyQueue {
 public:
  static constexpr absl::Duration kDrainWait = absl::Seconds(10);

  struct Entry {
    Transfer transfer;
    int slice = 0;
    std::uint64_t offset = 0;  // In the device buffer.
    std::uint64_t length = 0;
  };

  CopyQueue() = default;
  CopyQueue(const CopyQueue&) = delete;
  CopyQueue& operator=(const CopyQueue&) = delete;
  ~CopyQueue();

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  // Starts copying `source` to `destination` (Client::Copy; its errors).
  absl::Status Submit(Client& client, const Region& source, const Region& destination,
                      const CopyOptions& options, int slice, std::uint64_t offset);

  // Waits until `deadline` for the oldest copy and takes it off the queue.
  // Errors: the transfer's, naming its bytes of the device buffer's
  // [`first`, `end`), the range this staged copy moves.
  absl::StatusOr<Entry> FinishOldest(absl::Time deadline, std::uint64_t first,
                                     std::uint64_t end);

 private:
  std::deque<Entry> entries_;
};

// What a caller of StageInFile adds (memctl: its progress bar, its report,
// its step names); each may be empty.
struct StageHooks {
  // Called with each copy once it finished, in order, and the bytes it
  // moved.
  std::function<void(Transfer& transfer, std::uint64_t bytes)> copied;
  // Maps the reader's error (StageInFile returns what it returns).
  std::function<absl::Status(absl::Status)> read_failed;
};

// Fills `size` bytes of the device buffer `destination` from `offset` with
// the file's bytes from `file_offset`, read by `reader`'s threads into
// `staging`'s slices while the daemon copies the slices read before (at
// most half the slices queued as copies). Returns once every copy
// finished; on failure the copies still running are cancelled and waited
// for. Errors: the reader's (OUT_OF_RANGE when the file ends first; through
// hooks.read_failed), Client::Copy's and the transfers' (naming the bytes).
// The reader must be done with the staging before it goes: the caller
// destroys the reader first.
absl::Status StageInFile(Client& client, Staging& staging, const Buffer& destination,
                         std::uint64_t offset, std::uint64_t size, ParallelFileReader& reader,
                         std::uint64_t file_offset, const CopyOptions& options,
                         const StageHooks& hooks = {});

// Buffer::WriteFromFile of a device buffer, whose lease, state and range
// the caller checked: `length` (> 0) bytes of `fd` from `file_offset` into
// `destination` at `offset`, through a staging buffer this call creates
// and releases ("libmemd" its owner), read on `threads` threads (0: the
// reader's default; more than ParallelFileReader::kMaxReadThreads: that
// many), with O_DIRECT where the filesystem allows it and the page cache
// does not hold the range's start. Errors: INVALID_ARGUMENT (a pipe or a
// socket), Staging::Create's, StageInFile's.
absl::Status WriteFileToDevice(Client& client, const Buffer& destination, int fd,
                               std::uint64_t file_offset, std::uint64_t length,
                               std::uint64_t offset, int threads);

}  // namespace memd::internal
