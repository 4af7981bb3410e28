#include "common/file_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cpus.h"
#include "common/errno_status.h"

namespace memd {
namespace {

constexpr std::size_t kAlign = ParallelFileReader::kDirectAlignment;

bool Aligned(std::uint64_t value) { return value % kAlign == 0; }

absl::Status DirectRefused(int error) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the file's filesystem refuses O_DIRECT (", ErrnoStatus("open", error).message(),
      "; tmpfs before Linux 6.6 and ramfs do): read it through the page cache"));
}

// A second open file description of `fd`'s file with O_DIRECT, so that the
// caller's descriptor keeps its flags (its tails go through the page cache).
absl::StatusOr<UniqueFd> OpenDirect(int fd) {
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const int direct = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (direct < 0) {
    if (errno == EINVAL) return DirectRefused(errno);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open the file again for O_DIRECT through ", path, ": ",
        ErrnoStatus("open", errno).message()));
  }
  return UniqueFd(direct);
}

// How much of a range decides whether it is in the page cache.
constexpr std::uint64_t kCacheProbeBytes = std::uint64_t{64} << 20;

}  // namespace

bool FileMostlyCached(int fd, std::uint64_t offset, std::uint64_t length) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  // mmap maps from a page boundary: probe from the page that holds `offset`.
  const std::uint64_t start = offset - offset % page;
  const auto probe = static_cast<std::size_t>(
      std::min(length, kCacheProbeBytes) + (offset - start));
  if (length == 0) return false;
  void* mapped = ::mmap(nullptr, probe, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (mapped == MAP_FAILED) return false;
  std::vector<unsigned char> resident((probe + page - 1) / page);
  std::size_t cached = 0;
  if (::mincore(mapped, probe, resident.data()) == 0) {
    for (unsigned char flags : resident) cached += flags & 1;
  }
  ::munmap(mapped, probe);
  return cached * 10 >= resident.size() * 9;
}

int ParallelFileReader::DefaultReadThreads() { return std::clamp(UsableCpus(), 1, 8); }

absl::StatusOr<std::unique_ptr<ParallelFileReader>> ParallelFileReader::Create(
    int fd, const FileReadOptions& options) {
  if (fd < 0) return absl::InvalidArgumentError("no file to read (a negative descriptor)");
  if (options.threads < 0 || options.threads > kMaxReadThreads) {
    return absl::InvalidArgumentError(absl::StrCat("read threads must be 1 to ",
                                                   kMaxReadThreads, " (0: one per CPU, at "
                                                   "most 8), not ", options.threads));
  }
  if (options.piece_bytes == 0 || !Aligned(options.piece_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a read piece must be a positive multiple of ", kAlign, " bytes, not ",
        options.piece_bytes));
  }
  UniqueFd direct;
  if (options.direct != DirectIo::kOff) {
    absl::StatusOr<UniqueFd> opened = OpenDirect(fd);
    if (opened.ok()) {
      direct = *std::move(opened);
    } else if (options.direct == DirectIo::kRequire) {
      return opened.status();
    }
  }
  FileReadOptions resolved = options;
  if (resolved.threads == 0) resolved.threads = DefaultReadThreads();
  return std::unique_ptr<ParallelFileReader>(
      new ParallelFileReader(fd, std::move(direct), resolved));
}

ParallelFileReader::ParallelFileReader(int fd, UniqueFd direct_fd,
                                       const FileReadOptions& options)
    : fd_(fd), direct_fd_(std::move(direct_fd)), options_(options) {
  threads_.reserve(static_cast<std::size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Serve(); });
}

ParallelFileReader::~ParallelFileReader() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
  }
  for (std::thread& thread : threads_) thread.join();
}

bool ParallelFileReader::direct() const {
  absl::MutexLock lock(&mu_);
  return direct_fd_.valid() && !direct_refused_;
}

bool ParallelFileReader::UseDirect() const { return direct(); }

void ParallelFileReader::RefuseDirect() {
  absl::MutexLock lock(&mu_);
  direct_refused_ = true;
}

ParallelFileReader::Ticket ParallelFileReader::Submit(std::uint64_t offset,
                                                      std::span<std::byte> into) {
  absl::MutexLock lock(&mu_);
  const Ticket ticket = next_ticket_++;
  Job& job = jobs_[ticket];
  // Aligned pieces stay aligned: each starts piece_bytes after the last.
  const bool aligned =
      Aligned(offset) && Aligned(reinterpret_cast<std::uintptr_t>(into.data()));
  for (std::size_t done = 0; done < into.size();) {
    const std::size_t length =
        static_cast<std::size_t>(std::min<std::uint64_t>(options_.piece_bytes, into.size() - done));
    queue_.push_back(Piece{ticket, offset + done, into.data() + done, length, aligned});
    ++job.pieces_left;
    done += length;
  }
  return ticket;
}

absl::Status ParallelFileReader::Wait(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  auto found = jobs_.find(ticket);
  if (found == jobs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("no read ", ticket, " to wait for"));
  }
  Job& job = found->second;
  mu_.Await(absl::Condition(
      +[](Job* job) { return job->pieces_left == 0; }, &job));
  absl::Status status = std::move(job.status);
  jobs_.erase(found);
  return status;
}

void ParallelFileReader::Serve() {
  for (;;) {
    Piece piece;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ParallelFileReader* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (stopping_) return;
      piece = queue_.front();
      queue_.pop_front();
      // A failed range needs no more of its bytes.
      if (!jobs_[piece.ticket].status.ok()) {
        --jobs_[piece.ticket].pieces_left;
        continue;
      }
    }
    absl::Status status = ReadPiece(piece);
    absl::MutexLock lock(&mu_);
    Job& job = jobs_[piece.ticket];
    if (!status.ok() && (job.status.ok() || piece.offset < job.failed_at)) {
      job.status = std::move(status);
      job.failed_at = piece.offset;
    }
    --job.pieces_left;
  }
}

absl::Status ParallelFileReader::ReadPiece(const Piece& piece) {
  std::size_t done = 0;
  if (piece.aligned && UseDirect()) {
    const std::size_t aligned_length = piece.length / kAlign * kAlign;
    if (aligned_length > 0) {
      absl::StatusOr<std::size_t> read =
          Pread(direct_fd_.get(), piece.offset, piece.into, aligned_length, true);
      if (read.status().code() == absl::StatusCode::kUnimplemented) {
        // The filesystem opened the file for O_DIRECT but refuses the read
        // (an alignment finer than its block): the page cache it is.
        if (options_.direct == DirectIo::kRequire) {
          return absl::FailedPreconditionError(absl::StrCat(
              "an O_DIRECT read of ", aligned_length, " bytes at byte ", piece.offset,
              " was refused (EINVAL): the filesystem needs another alignment; read the file "
              "through the page cache"));
        }
        RefuseDirect();
      } else if (!read.ok()) {
        return read.status();
      } else {
        done = *read;
        direct_bytes_ += done;
      }
    }
  }
  if (done < piece.length) {
    absl::StatusOr<std::size_t> read =
        Pread(fd_, piece.offset + done, piece.into + done, piece.length - done, false);
    if (!read.ok()) return read.status();
  }
  if (options_.cache == CachePolicy::kDrop) {
    // Advice only: a failure leaves pages cached, which is not wrong.
    (void)::posix_fadvise(fd_, static_cast<off_t>(piece.offset),
                          static_cast<off_t>(piece.length), POSIX_FADV_DONTNEED);
  }
  return absl::OkStatus();
}

// Reads up to `length` bytes at `offset` into `into`; returns how many.
// Buffered: all of them, or an error. With `direct`: UNIMPLEMENTED when the
// read is refused (EINVAL) before a byte came, and a short read ends the
// direct part early (its offset is no longer aligned): the caller reads the
// rest through the page cache.
absl::StatusOr<std::size_t> ParallelFileReader::Pread(int fd, std::uint64_t offset,
                                                      std::byte* into, std::size_t length,
                                                      bool direct) {
  std::size_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(fd, into + done, length - done,
                                static_cast<off_t>(offset + done));
    const int error = errno;
    if (got < 0 && error == EINTR) continue;
    if (got < 0 && direct && error == EINVAL && done == 0) {
      return absl::UnimplementedError("O_DIRECT refused");
    }
    if (got < 0) {
      const absl::Status status = ErrnoStatus("pread", error);
      return absl::Status(status.code(),
                          absl::StrCat("reading ", length - done, " bytes at byte ",
                                       offset + done, ": ", status.message()));
    }
    if (got == 0) {
      return absl::OutOfRangeError(absl::StrCat("the file ended at byte ", offset + done,
                                                ", before byte ", offset + length));
    }
    done += static_cast<std::size_t>(got);
    if (direct && !Aligned(done)) break;
  }
  return done;
}

}  // namespace memd
