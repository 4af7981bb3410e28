#include "client/src/staging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bytes.h"
#include "common/errno_status.h"

namespace memd::internal {
namespace {

constexpr std::uint64_t kPage = 4096;

// Whether the daemon has a pinned pool (Stats lists one pool per location
// it serves). A daemon that cannot say gets host staging: slower, not wrong.
bool ServesPinned(Client& client) {
  absl::StatusOr<DaemonStats> stats = client.Stats();
  if (!stats.ok()) return false;
  return std::any_of(stats->pools.begin(), stats->pools.end(),
                     [](const PoolStats& pool) { return pool.location == "pinned"; });
}

// Tells staging buffers of one process apart (threads may stage at once).
std::atomic<std::uint64_t> staging_count{0};

// Cancels `transfer` and waits until it ended (or `until`), whatever came.
void CancelAndWait(Transfer& transfer, absl::Time until) {
  (void)transfer.Cancel();
  (void)transfer.Wait(until);
}

}  // namespace

absl::StatusOr<Staging> Staging::Create(Client& client, std::uint64_t total,
                                        std::string_view owner) {
  const std::uint64_t slice_bytes =
      std::min(kSliceBytes, AlignUp(std::max<std::uint64_t>(total, 1), kPage));
  const int slices = std::max(1, static_cast<int>(std::min<std::uint64_t>(
                                     kSlices, (total + slice_bytes - 1) / slice_bytes)));
  const std::uint64_t bytes = slice_bytes * static_cast<std::uint64_t>(slices);
  const std::string name = absl::StrCat(std::string(owner), "/staging-", client.session_id(), "-",
                                        ::getpid(), "-", staging_count.fetch_add(1));
  CreateOptions options;
  options.persistence = Persistence::kEphemeral;
  options.mode = 0600;
  options.populate = true;  // Every byte is written: fault the pages in once.
  std::vector<std::string> locations;
  if (ServesPinned(client)) locations.push_back("pinned");
  locations.push_back("host");
  absl::Status last;
  for (const std::string& location : locations) {
    options.location = location;
    absl::StatusOr<Buffer> buffer = client.Create(name, bytes, options);
    if (buffer.ok()) return Staging(*std::move(buffer), slice_bytes, slices);
    last = buffer.status();
  }
  return absl::Status(last.code(), absl::StrCat("a staging buffer of ", FormatBytes(bytes),
                                                ": ", last.message()));
}

std::span<std::byte> Staging::Slice(int index, std::uint64_t length) {
  return buffer_.mutable_data().subspan(static_cast<std::size_t>(index) * slice_bytes_,
                                        static_cast<std::size_t>(length));
}

Region Staging::SliceRegion(int index, std::uint64_t length) const {
  return Region{&buffer_, static_cast<std::uint64_t>(index) * slice_bytes_, length};
}

CopyQueue::~CopyQueue() {
  for (Entry& entry : entries_) (void)entry.transfer.Cancel();
  const absl::Time until = absl::Now() + kDrainWait;
  for (Entry& entry : entries_) (void)entry.transfer.Wait(until);
}

absl::Status CopyQueue::Submit(Client& client, const Region& source, const Region& destination,
                               const CopyOptions& options, int slice, std::uint64_t offset) {
  const std::uint64_t length = source.length.value_or(0);
  absl::StatusOr<Transfer> transfer = client.Copy(source, destination, options);
  if (!transfer.ok()) return transfer.status();
  entries_.push_back(Entry{*std::move(transfer), slice, offset, length});
  return absl::OkStatus();
}

absl::StatusOr<CopyQueue::Entry> CopyQueue::FinishOldest(absl::Time deadline,
                                                         std::uint64_t first,
                                                         std::uint64_t end) {
  Entry entry = std::move(entries_.front());
  entries_.pop_front();
  absl::Status status = entry.transfer.Wait(deadline);
  if (!status.ok()) {
    CancelAndWait(entry.transfer, absl::Now() + kDrainWait);
    const std::string of = first == 0 ? absl::StrCat(end)
                                      : absl::StrCat("[", first, ", ", end, ")");
    return absl::Status(status.code(),
                        absl::StrCat("copying bytes [", entry.offset, ", ",
                                     entry.offset + entry.length, ") of ", of, ": ",
                                     status.message()));
  }
  return entry;
}

absl::Status StageInFile(Client& client, Staging& staging, const Buffer& destination,
                         std::uint64_t offset, std::uint64_t size, ParallelFileReader& reader,
                         std::uint64_t file_offset, const CopyOptions& options,
                         const StageHooks& hooks) {
  const std::uint64_t slice_bytes = staging.slice_bytes();
  const std::uint64_t slices = static_cast<std::uint64_t>(staging.slices());
  const std::uint64_t pieces = (size + slice_bytes - 1) / slice_bytes;
  const absl::Time deadline = options.deadline.value_or(absl::InfiniteFuture());
  // Copies queued with the daemon at most: enough that the link never
  // waits for the next Copy call; the other slices are the readers'.
  const std::size_t max_copies = static_cast<std::size_t>(std::max<std::uint64_t>(1, slices / 2));
  std::deque<ParallelFileReader::Ticket> reads;  // Of the pieces in order.
  auto read = [&](std::uint64_t piece) {
    const std::uint64_t at = piece * slice_bytes;
    const std::uint64_t length = std::min(slice_bytes, size - at);
    reads.push_back(reader.Submit(file_offset + at,
                                  staging.Slice(static_cast<int>(piece % slices), length)));
  };
  for (std::uint64_t piece = 0; piece < std::min(slices, pieces); ++piece) read(piece);
  CopyQueue copies;
  auto finish_oldest = [&]() -> absl::StatusOr<CopyQueue::Entry> {
    absl::StatusOr<CopyQueue::Entry> done =
        copies.FinishOldest(deadline, offset, offset + size);
    if (done.ok() && hooks.copied) hooks.copied(done->transfer, done->length);
    return done;
  };
  for (std::uint64_t piece = 0; piece < pieces; ++piece) {
    const std::uint64_t at = piece * slice_bytes;
    const std::uint64_t length = std::min(slice_bytes, size - at);
    absl::Status got = reader.Wait(reads.front());
    reads.pop_front();
    if (!got.ok()) return hooks.read_failed ? hooks.read_failed(std::move(got)) : got;
    const int slice = static_cast<int>(piece % slices);
    if (absl::Status status = copies.Submit(client, staging.SliceRegion(slice, length),
                                            Region{&destination, offset + at, length},
                                            options, slice, offset + at);
        !status.ok()) {
      return status;
    }
    while (copies.size() >= max_copies) {
      absl::StatusOr<CopyQueue::Entry> done = finish_oldest();
      if (!done.ok()) return done.status();
      // Its slice is free again: read the piece that goes there next.
      const std::uint64_t next = (done->offset - offset) / slice_bytes + slices;
      if (next < pieces) read(next);
    }
  }
  while (!copies.empty()) {
    absl::StatusOr<CopyQueue::Entry> done = finish_oldest();
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

absl::Status WriteFileToDevice(Client& client, const Buffer& destination, int fd,
                               std::uint64_t file_offset, std::uint64_t length,
                               std::uint64_t offset, int threads) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", errno);
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return absl::InvalidArgumentError(
        "a pipe or a socket cannot be read at an offset: give a regular file");
  }
  FileReadOptions read_options;
  read_options.threads = std::clamp(threads, 0, ParallelFileReader::kMaxReadThreads);
  read_options.direct = FileMostlyCached(fd, file_offset, length) ? DirectIo::kOff
                                                                 : DirectIo::kPrefer;
  absl::StatusOr<Staging> staging = Staging::Create(client, length, ".libmemd");
  if (!staging.ok()) return staging.status();
  // Gone before the staging it reads into.
  absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
      ParallelFileReader::Create(fd, read_options);
  if (!reader.ok()) return reader.status();
  return StageInFile(client, *staging, destination, offset, length, **reader, file_offset,
                     CopyOptions{});
}

}  // namespace memd::internal
