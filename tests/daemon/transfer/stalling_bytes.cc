#include "tests/daemon/transfer/stalling_bytes.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memd::test {
namespace {

absl::Status Refused(const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StallingBytes>> StallingBytes::Make(std::uint64_t bytes,
                                                                   std::uint64_t ready) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (ready % page != 0 || ready >= bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("ready = ", ready, " must be a multiple of ", page, " below ", bytes));
  }
  const int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) return Refused("userfaultfd");
  uffdio_api api{.api = UFFD_API, .features = 0, .ioctls = 0};
  if (::ioctl(fd, UFFDIO_API, &api) != 0) {
    absl::Status refused = Refused("UFFDIO_API");
    ::close(fd);
    return refused;
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
  if (mapped == MAP_FAILED) {
    absl::Status refused = Refused("mmap");
    ::close(fd);
    return refused;
  }
  auto* data = static_cast<std::byte*>(mapped);
  std::memset(data, 0, ready);  // Present: no fault there.
  uffdio_register registered{};
  registered.range.start = reinterpret_cast<std::uint64_t>(data + ready);
  registered.range.len = bytes - ready;
  registered.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (::ioctl(fd, UFFDIO_REGISTER, &registered) != 0) {
    absl::Status refused = Refused("UFFDIO_REGISTER");
    ::munmap(mapped, bytes);
    ::close(fd);
    return refused;
  }
  return std::unique_ptr<StallingBytes>(new StallingBytes(data, bytes, ready, fd));
}

StallingBytes::~StallingBytes() {
  LetGo();
  ::munmap(data_, bytes_);
}

bool StallingBytes::AwaitRead(absl::Duration guard) {
  if (fd_ < 0) return false;
  pollfd ready{.fd = fd_, .events = POLLIN, .revents = 0};
  const int waited = ::poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(guard)));
  if (waited <= 0) return false;
  uffd_msg message{};
  if (::read(fd_, &message, sizeof(message)) != static_cast<ssize_t>(sizeof(message))) {
    return false;
  }
  return message.event == UFFD_EVENT_PAGEFAULT;
}

absl::Status StallingBytes::Release(std::span<const std::byte> fill) {
  if (fd_ < 0) return absl::FailedPreconditionError("let go already");
  if (fill.size() != bytes_ - ready_) {
    return absl::InvalidArgumentError(
        absl::StrCat(fill.size(), " bytes to fill ", bytes_ - ready_, " stalling bytes"));
  }
  uffdio_copy copy{};
  copy.dst = reinterpret_cast<std::uint64_t>(data_ + ready_);
  copy.src = reinterpret_cast<std::uint64_t>(fill.data());
  copy.len = fill.size();
  copy.mode = 0;  // And wake the reader.
  if (::ioctl(fd_, UFFDIO_COPY, &copy) != 0) return Refused("UFFDIO_COPY");
  return absl::OkStatus();
}

void StallingBytes::LetGo() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
}

}  // namespace memd::test
