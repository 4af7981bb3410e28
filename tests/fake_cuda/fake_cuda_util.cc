// memd FAKE CUDA driver (a test double): helpers the API areas share.

#include "tests/fake_cuda/fake_cuda_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>

namespace memd::fake_cuda {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

CUuuid PhysicalUuid(int physical) {
  static constexpr char kPrefix[] = "memd-fake-gpu";
  static_assert(sizeof(kPrefix) - 1 == 13);
  CUuuid uuid;
  std::memcpy(uuid.bytes, kPrefix, 13);
  const uint32_t index = static_cast<uint32_t>(physical);
  uuid.bytes[13] = static_cast<char>((index >> 16) & 0xff);
  uuid.bytes[14] = static_cast<char>((index >> 8) & 0xff);
  uuid.bytes[15] = static_cast<char>(index & 0xff);
  return uuid;
}

std::string FdTarget(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  const ssize_t length = readlink(path, target, sizeof(target) - 1);
  if (length < 0) return "";
  return std::string(target, static_cast<size_t>(length));
}

CUresult CreateMemfd(const std::string& name, size_t size, int* fd_out) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *fd_out = fd;
  return CUDA_SUCCESS;
}

}  // namespace memd::fake_cuda
