#include "tools/memctl/staged_copy.h"

#include <algorithm>
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

// What each finished copy of a staged copy adds: bytes, path and retries
// to the report, the bar redrawn.
void Tally(Transfer& transfer, std::uint64_t bytes, std::uint64_t total, ProgressBar& bar,
           TransferReport& report) {
  Tally(transfer, report);
  report.bytes += bytes;
  bar.Update(report.bytes, total);
}

// Waits for the oldest of `copies`, tallied.
absl::StatusOr<internal::CopyQueue::Entry> FinishOldest(internal::CopyQueue& copies,
                                                        const CopyOptions& options,
                                                        std::uint64_t total, ProgressBar& bar,
                                                        TransferReport& report) {
  absl::StatusOr<internal::CopyQueue::Entry> done =
      copies.FinishOldest(DeadlineOf(options), 0, total);
  if (done.ok()) Tally(done->transfer, done->length, total, bar, report);
  return done;
}

}  // namespace

absl::StatusOr<Staging> CreateStaging(Client& client, std::uint64_t total) {
  absl::StatusOr<Staging> staging = Staging::Create(client, total, ".memctl");
  if (!staging.ok()) return Failed("staging", staging.status());
  return staging;
}

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
  internal::CopyQueue copies;
  std::uint64_t offset = 0;
  for (int next = 0; offset < size; ++next) {
    const int slice = next % staging.slices();
    // Slices are used in turn: the oldest copy is the one reading this slice.
    if (copies.size() == static_cast<std::size_t>(staging.slices())) {
      absl::StatusOr<internal::CopyQueue::Entry> done =
          FinishOldest(copies, options, size, bar, report);
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
    absl::StatusOr<internal::CopyQueue::Entry> done =
        FinishOldest(copies, options, size, bar, report);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

absl::Status StageInFile(Client& client, Staging& staging, const Buffer& destination,
                         std::uint64_t size, ParallelFileReader& reader,
                         std::uint64_t file_offset, const std::string& label,
                         const CopyOptions& options, ProgressBar& bar,
                         TransferReport& report) {
  const std::string step = absl::StrCat("read ", label);
  internal::StageHooks hooks;
  hooks.copied = [&](Transfer& transfer, std::uint64_t bytes) {
    Tally(transfer, bytes, size, bar, report);
  };
  hooks.read_failed = [&](absl::Status got) {
    if (absl::IsOutOfRange(got)) {
      return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                              "the file ended before its ", size, " bytes (", got.message(),
                              "); did it change while memctl read it?")));
    }
    return Failed(step, std::move(got));
  };
  return internal::StageInFile(client, staging, destination, 0, size, reader, file_offset,
                               options, hooks);
}

absl::Status StageOut(Client& client, Staging& staging, const Buffer& source,
                      OutputFile& out, const CopyOptions& options, ProgressBar& bar,
                      TransferReport& report) {
  const std::uint64_t size = source.size();
  const std::uint64_t slice_bytes = staging.slice_bytes();
  const std::uint64_t pieces = (size + slice_bytes - 1) / slice_bytes;
  const std::uint64_t slices = static_cast<std::uint64_t>(staging.slices());
  internal::CopyQueue copies;
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
    absl::StatusOr<internal::CopyQueue::Entry> done =
        FinishOldest(copies, options, size, bar, report);
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
