#include "tests/support/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

namespace memd::test {

std::string ReadWholeFile(const std::string& path) {
  // By read(2) in large pieces: a character at a time through a stream
  // took a minute for 300 MiB in the sanitizer build (Debug, nothing
  // inlined).
  std::string bytes;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) {
    bytes.reserve(static_cast<std::size_t>(info.st_size));
  }
  constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::size_t length = 0;
  for (;;) {
    bytes.resize(length + kPiece);
    const ssize_t got = ::read(fd, bytes.data() + length, kPiece);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    length += static_cast<std::size_t>(got);
  }
  bytes.resize(length);
  ::close(fd);
  return bytes;
}

void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool PathExists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

std::string RandomBytes(std::size_t size, unsigned seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  // Four bytes a draw: a draw a byte cost seconds for the larger files in
  // the sanitizer build.
  for (std::size_t at = 0; at < size; at += sizeof(std::uint32_t)) {
    const std::uint32_t word = generator();
    std::memcpy(bytes.data() + at, &word, std::min(sizeof(word), size - at));
  }
  return bytes;
}

std::size_t CachedBytes(int fd, std::size_t size) {
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return size;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  std::size_t cached = 0;
  if (::mincore(mapped, size, resident.data()) == 0) {
    for (unsigned char flags : resident) cached += (flags & 1) * page;
  }
  ::munmap(mapped, size);
  return cached;
}

std::size_t CachedBytes(const std::string& path, std::size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return size;
  const std::size_t cached = CachedBytes(fd, size);
  ::close(fd);
  return cached;
}

}  // namespace memd::test
