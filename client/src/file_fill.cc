#include "client/src/file_fill.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace memd::internal {
namespace {

// One sendfile(2) at most this large (Linux moves at most 2 GiB - 4 KiB a
// call anyway), and no thread gets less than this: a thread costs more
// than it saves below it.
constexpr std::uint64_t kStep = std::uint64_t{1} << 30;
constexpr std::uint64_t kLeastPerThread = std::uint64_t{32} << 20;

// One thread's range: `out` is positioned by this call.
absl::Status SendRange(int out, std::uint64_t out_offset, int file, std::uint64_t file_offset,
                       std::uint64_t length) {
  if (::lseek(out, static_cast<off_t>(out_offset), SEEK_SET) < 0) {
    return ErrnoStatus("lseek", errno);
  }
  off_t in = static_cast<off_t>(file_offset);
  std::uint64_t done = 0;
  while (done < length) {
    const ssize_t sent = ::sendfile(out, file, &in, std::min(kStep, length - done));
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EINVAL || errno == ESPIPE)) {
      return absl::InvalidArgumentError(
          "sendfile cannot read this file (a pipe, a socket, a terminal?): give a regular file");
    }
    if (sent < 0) return ErrnoStatus("sendfile", errno);
    if (sent == 0) {
      return absl::OutOfRangeError(absl::StrCat(
          "the file ended at byte ", file_offset + done, ", before the ",
          file_offset + length, " the copy needs"));
    }
    done += static_cast<std::uint64_t>(sent);
  }
  return absl::OkStatus();
}

// A new open file description of `fd` for writing, or -1.
int Reopen(int fd) {
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  return ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
}

}  // namespace

absl::Status SendFileInto(int segment, std::uint64_t segment_offset, int file,
                          std::uint64_t file_offset, std::uint64_t length, int threads) {
  const std::uint64_t most = std::max<std::uint64_t>(1, length / kLeastPerThread);
  const int count = static_cast<int>(std::clamp<std::uint64_t>(threads, 1, most));
  std::vector<UniqueFd> outs;
  for (int i = 0; i < count; ++i) {
    UniqueFd out(Reopen(segment));
    if (!out) break;
    outs.push_back(std::move(out));
  }
  if (outs.empty()) {
    // No /proc: one range, on the kept descriptor itself (a Buffer is used
    // by one thread at a time, so its position is this call's).
    return SendRange(segment, segment_offset, file, file_offset, length);
  }
  const std::uint64_t share = (length + outs.size() - 1) / outs.size();
  std::vector<absl::Status> results(outs.size());
  std::vector<std::thread> senders;
  for (std::size_t i = 1; i < outs.size(); ++i) {
    const std::uint64_t start = std::min(length, i * share);
    const std::uint64_t bytes = std::min(share, length - start);
    senders.emplace_back([&, i, start, bytes] {
      results[i] = SendRange(outs[i].get(), segment_offset + start, file, file_offset + start,
                             bytes);
    });
  }
  results[0] = SendRange(outs[0].get(), segment_offset, file, file_offset,
                         std::min(share, length));
  for (std::thread& sender : senders) sender.join();
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

}  // namespace memd::internal
