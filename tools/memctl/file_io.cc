#include "tools/memctl/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/errno_status.h"
#include "tools/memctl/failure.h"

namespace memd::memctl {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

std::string ReadStep(const std::string& label) { return absl::StrCat("read ", label); }

}  // namespace

absl::StatusOr<Input> OpenInput(const std::string& path, const FileOptions& options) {
  Input input;
  if (path == "-") {
    input.label = "stdin";
    // A duplicate, so that closing the Input never closes fd 0 itself.
    input.fd.reset(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
    if (!input.fd) return Failed(ReadStep(input.label), ErrnoStatus("dup stdin", errno));
  } else {
    input.label = path;
    // O_NONBLOCK: open(2) of a FIFO would otherwise block until a writer
    // comes, for ever if none does.
    input.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!input.fd) return Failed(ReadStep(path), ErrnoStatus("open", errno));
  }
  struct stat st {};
  if (::fstat(input.fd.get(), &st) != 0) {
    return Failed(ReadStep(input.label), ErrnoStatus("fstat", errno));
  }
  if (path != "-") {
    if (S_ISFIFO(st.st_mode)) {
      absl::Status waited = WaitForFifoWriter(input.fd.get(), path, options.fifo_timeout);
      if (!waited.ok()) return Failed(ReadStep(path), waited);
    }
    // Reads wait for their bytes from here on, as on stdin.
    const int flags = ::fcntl(input.fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(input.fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return Failed(ReadStep(path), ErrnoStatus("fcntl", errno));
    }
  }
  if (S_ISDIR(st.st_mode)) {
    return Failed(ReadStep(input.label),
                  absl::InvalidArgumentError("is a directory, not a file"));
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) input.kind = Input::Kind::kDevice;
  if (S_ISREG(st.st_mode)) {
    input.kind = Input::Kind::kFile;
    // stdin may be a regular file read part-way already: count what is left.
    off_t offset = ::lseek(input.fd.get(), 0, SEEK_CUR);
    if (offset >= 0 && offset <= st.st_size) {
      input.size = static_cast<std::uint64_t>(st.st_size - offset);
    }
  }
  return input;
}

absl::Status ReadExactly(Input& input, std::span<std::byte> into,
                         const std::string& promised_by) {
  std::size_t done = 0;
  while (done < into.size()) {
    std::size_t want = std::min(into.size() - done, kChunkBytes);
    ssize_t got = ::read(input.fd.get(), into.data() + done, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Failed(ReadStep(input.label), ErrnoStatus("read", errno));
    }
    if (got == 0 && !promised_by.empty()) {
      return Failed(ReadStep(input.label),
                    absl::FailedPreconditionError(absl::StrCat(
                        input.label, " ended after ", done, " of the ", into.size(),
                        " bytes ", promised_by, " promised")));
    }
    if (got == 0) {
      return Failed(ReadStep(input.label),
                    absl::FailedPreconditionError(absl::StrCat(
                        "the file ended after ", done, " of ", into.size(),
                        " bytes; did it change while memctl read it?")));
    }
    done += static_cast<std::size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AtEnd(Input& input) {
  for (;;) {
    char byte;
    ssize_t got = ::read(input.fd.get(), &byte, 1);
    if (got >= 0) return got == 0;
    if (errno != EINTR) return Failed(ReadStep(input.label), ErrnoStatus("read", errno));
  }
}

absl::StatusOr<Collected> ReadToEnd(Input& input, std::uint64_t max_bytes) {
  Collected collected;
  for (;;) {
    if (collected.size > max_bytes) {
      return Failed(ReadStep(input.label),
                    absl::ResourceExhaustedError(absl::StrCat(
                        input.label, " holds more than ", FormatBytes(max_bytes), " (",
                        max_bytes, " bytes), the most memctl collects from a stream "
                        "of unknown size; pass --size BYTES to stream it straight "
                        "into the buffer (or raise --max-stream)")));
    }
    if (collected.pieces.empty() || collected.pieces.back().size() == kChunkBytes) {
      collected.pieces.emplace_back();
      collected.pieces.back().reserve(kChunkBytes);
    }
    std::string& piece = collected.pieces.back();
    // One byte past the limit tells a stream that ends there from one that
    // goes on.
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(
        kChunkBytes - piece.size(), max_bytes + 1 - collected.size));
    const std::size_t old_size = piece.size();
    piece.resize(old_size + want);
    ssize_t got = ::read(input.fd.get(), piece.data() + old_size, want);
    piece.resize(old_size + static_cast<std::size_t>(std::max<ssize_t>(got, 0)));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Failed(ReadStep(input.label), ErrnoStatus("read", errno));
    }
    collected.size += static_cast<std::uint64_t>(got);
    if (got == 0) return collected;
  }
}

void Collected::CopyTo(std::span<std::byte> into) const {
  std::size_t done = 0;
  for (const std::string& piece : pieces) {
    std::memcpy(into.data() + done, piece.data(), piece.size());
    done += piece.size();
  }
}

absl::Status WriteAll(int fd, std::span<const std::byte> bytes,
                      const std::string& label) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    std::size_t want = std::min(bytes.size() - done, kChunkBytes);
    ssize_t wrote = ::write(fd, bytes.data() + done, want);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return Failed(absl::StrCat("write ", label), ErrnoStatus("write", errno));
    }
    done += static_cast<std::size_t>(wrote);
  }
  return absl::OkStatus();
}

}  // namespace memd::memctl
