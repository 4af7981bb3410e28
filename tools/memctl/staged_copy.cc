#include "tools/memctl/staged_copy.h"

#include <algorithm>
#include <deque>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_io.h"

namespace memd::memctl {
namespace {

absl::Time DeadlineOf(const CopyOptions& options) {
  return options.deadline.value_or(absl::InfiniteFuture());
}

// What a finished copy adds to the report (a daemon that cannot say any
// more leaves the path and retries as they were).
void Tally(Transfer& transfer, TransferReport& report) {
  absl::StatusOr<TransferProgress> progress = transfer.Progress();
  if (!progress.ok()) return;
  if (!progress->path.empty()) report.path = progress->path;
  report.retries += progress->retries;
}

// Copies running for one staged put or get, oldest first, each on one
// staging slice; cancelled when dropped unfinished (a failure on the way).
class CopyQueue {
 public:
  struct Entry {
    Transfer transfer;
    int slice = 0;
    std::uint64_t offset = 0;  // In the device buffer.
    std::uint64_t length = 0;
  };

  ~CopyQueue() {
    for (Entry& entry : entries_) (void)entry.transfer.Cancel();
  }

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  absl::Status Submit(Client& client, const Region& source, const Region& destination,
                      const CopyOptions& options, int slice, std::uint64_t offset) {
    const std::uint64_t length = source.length.value_or(0);
    absl::StatusOr<Transfer> transfer = client.Copy(source, destination, options);
    if (!transfer.ok()) return transfer.status();
    entries_.push_back(Entry{*std::move(transfer), slice, offset, length});
    return absl::OkStatus();
  }

  // Waits for the oldest copy and takes it off the queue.
  absl::StatusOr<Entry> FinishOldest(const CopyOptions& options, std::uint64_t total,
                                     ProgressBar& bar, TransferReport& report) {
    Entry entry = std::move(entries_.front());
    entries_.pop_front();
    absl::Status status = entry.transfer.Wait(DeadlineOf(options));
    if (!status.ok()) {
      (void)entry.transfer.Cancel();
      return absl::Status(status.code(),
                          absl::StrCat("copying bytes [", entry.offset, ", ",
                                       entry.offset + entry.length, ") of ", total, ": ",
                                       status.message()));
    }
    Tally(entry.transfer, report);
    report.bytes += entry.length;
    bar.Update(report.bytes, total);
    return entry;
  }

 private:
  std::deque<Entry> entries_;
};

}  // namespace

absl::Status CopyAndWait(Client& client, const Region& source, const Region& destination,
                         const CopyOptions& options, ProgressBar& bar,
                         TransferReport& report) {
  absl::StatusOr<Transfer> transfer = client.Copy(source, destination, options);
  if (!transfer.ok()) return transfer.status();
  const absl::Time deadline = DeadlineOf(options);
  absl::Status status;
  for (;;) {
    // Without a bar there is nothing to redraw: one wait to the end.
    const absl::Time until =
        bar.enabled() ? std::min(deadline, absl::Now() + ProgressBar::kProgressInterval)
                      : deadline;
    status = transfer->Wait(until);
    if (status.code() != absl::StatusCode::kDeadlineExceeded || until >= deadline) break;
    absl::StatusOr<TransferProgress> progress = transfer->Progress();
    if (!progress.ok()) {
      status = progress.status();
      break;
    }
    if (progress->finished()) {
      status = progress->status;
      break;
    }
    bar.Update(progress->bytes_done, progress->bytes_total);
  }
  if (!status.ok()) {
    // Our own wait ran out (--timeout): the daemon's deadline is the same,
    // but do not leave it to chance.
    (void)transfer->Cancel();
    return status;
  }
  report.bytes += source.length.value_or(source.buffer->size() - source.offset);
  Tally(*transfer, report);
  return absl::OkStatus();
}

absl::Status StageIn(Client& client, Staging& staging, const Buffer& destination,
                     std::uint64_t size, InputReader& reader, const CopyOptions& options,
                     ProgressBar& bar, TransferReport& report) {
  CopyQueue copies;
  std::uint64_t offset = 0;
  for (int next = 0; offset < size; ++next) {
    const int slice = next % staging.slices();
    // Slices are used in turn: the oldest copy is the one reading this slice.
    if (copies.size() == static_cast<std::size_t>(staging.slices())) {
      absl::StatusOr<CopyQueue::Entry> done = copies.FinishOldest(options, size, bar, report);
      if (!done.ok()) return done.status();
    }
    const std::uint64_t length = std::min(staging.slice_bytes(), size - offset);
    if (absl::Status status = reader.Read(staging.Slice(slice, length)); !status.ok()) {
      return status;
    }
    if (absl::Status status =
            copies.Submit(client, staging.SliceRegion(slice, length),
                          Region{&destination, offset, length}, options, slice, offset);
        !status.ok()) {
      return status;
    }
    offset += length;
  }
  if (absl::Status status = reader.CheckEnd(); !status.ok()) return status;
  while (!copies.empty()) {
    absl::StatusOr<CopyQueue::Entry> done = copies.FinishOldest(options, size, bar, report);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

absl::Status StageInFile(Client& client, Staging& staging, const Buffer& destination,
                         std::uint64_t size, ParallelFileReader& reader,
                         std::uint64_t file_offset, const std::string& label,
                         const CopyOptions& options, ProgressBar& bar,
                         TransferReport& report) {
  const std::uint64_t slice_bytes = staging.slice_bytes();
  const std::uint64_t slices = static_cast<std::uint64_t>(staging.slices());
  const std::uint64_t pieces = (size + slice_bytes - 1) / slice_bytes;
  // Copies queued with the daemon at most: enough that the link never
  // waits for memctl's next Copy call; the other slices are the readers'.
  const std::size_t max_copies = static_cast<std::size_t>(std::max<std::uint64_t>(1, slices / 2));
  const std::string step = absl::StrCat("read ", label);
  std::deque<ParallelFileReader::Ticket> reads;  // Of the pieces in order.
  auto read = [&](std::uint64_t piece) {
    const std::uint64_t offset = piece * slice_bytes;
    const std::uint64_t length = std::min(slice_bytes, size - offset);
    reads.push_back(reader.Submit(file_offset + offset,
                                  staging.Slice(static_cast<int>(piece % slices), length)));
  };
  for (std::uint64_t piece = 0; piece < std::min(slices, pieces); ++piece) read(piece);
  CopyQueue copies;
  for (std::uint64_t piece = 0; piece < pieces; ++piece) {
    const std::uint64_t offset = piece * slice_bytes;
    const std::uint64_t length = std::min(slice_bytes, size - offset);
    absl::Status got = reader.Wait(reads.front());
    reads.pop_front();
    if (absl::IsOutOfRange(got)) {
      return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                              "the file ended before its ", size, " bytes (", got.message(),
                              "); did it change while memctl read it?")));
    }
    if (!got.ok()) return Failed(step, got);
    const int slice = static_cast<int>(piece % slices);
    if (absl::Status status =
            copies.Submit(client, staging.SliceRegion(slice, length),
                          Region{&destination, offset, length}, options, slice, offset);
        !status.ok()) {
      return status;
    }
    while (copies.size() >= max_copies) {
      absl::StatusOr<CopyQueue::Entry> done = copies.FinishOldest(options, size, bar, report);
      if (!done.ok()) return done.status();
      // Its slice is free again: read the piece that goes there next.
      const std::uint64_t next = done->offset / slice_bytes + slices;
      if (next < pieces) read(next);
    }
  }
  while (!copies.empty()) {
    absl::StatusOr<CopyQueue::Entry> done = copies.FinishOldest(options, size, bar, report);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

absl::Status StageOut(Client& client, Staging& staging, const Buffer& source,
                      OutputFile& out, const CopyOptions& options, ProgressBar& bar,
                      TransferReport& report) {
  const std::uint64_t size = source.size();
  const std::uint64_t slice_bytes = staging.slice_bytes();
  const std::uint64_t pieces = (size + slice_bytes - 1) / slice_bytes;
  const std::uint64_t slices = static_cast<std::uint64_t>(staging.slices());
  CopyQueue copies;
  auto submit = [&](std::uint64_t piece) {
    const int slice = static_cast<int>(piece % slices);
    const std::uint64_t offset = piece * slice_bytes;
    const std::uint64_t length = std::min(slice_bytes, size - offset);
    return copies.Submit(client, Region{&source, offset, length},
                         staging.SliceRegion(slice, length), options, slice, offset);
  };
  for (std::uint64_t piece = 0; piece < std::min(slices, pieces); ++piece) {
    if (absl::Status status = submit(piece); !status.ok()) return status;
  }
  for (std::uint64_t piece = 0; piece < pieces; ++piece) {
    absl::StatusOr<CopyQueue::Entry> done = copies.FinishOldest(options, size, bar, report);
    if (!done.ok()) return done.status();
    if (absl::Status status = out.Write(staging.Slice(done->slice, done->length));
        !status.ok()) {
      return status;
    }
    // The slice is free again: fetch the piece that goes there next.
    if (piece + slices < pieces) {
      if (absl::Status status = submit(piece + slices); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace memd::memctl
