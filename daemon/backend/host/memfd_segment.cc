#include "daemon/backend/host/memfd_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/errno_status.h"

namespace memd::backend {

absl::StatusOr<std::unique_ptr<MemfdSegment>> MemfdSegment::Create(
    std::uint64_t bytes, bool pin) {
  UniqueFd fd(::memfd_create(pin ? "memd:pinned" : "memd:host",
                             MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return ErrnoStatus("memfd_create", errno);
  // fallocate commits the pages now: out of memory is an error here, not a
  // SIGBUS in a client later.
  int rc;
  do {
    rc = ::fallocate(fd.get(), 0, 0, static_cast<off_t>(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int error = errno;
    if (error == ENOSPC || error == ENOMEM) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "host memory: cannot commit ", bytes, " bytes (",
          FormatBytes(bytes), "): fallocate: ", std::strerror(error)));
    }
    return ErrnoStatus("fallocate", error);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return ErrnoStatus("fcntl(F_ADD_SEALS)", errno);
  }
  // A memfd has no path to reopen but its /proc/self/fd link; opening that
  // O_RDONLY makes a new open file description that mmap refuses to map
  // writable, while sharing the same pages.
  std::string path = absl::StrCat("/proc/self/fd/", fd.get());
  UniqueFd read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!read_only) return ErrnoStatus(absl::StrCat("open ", path), errno);
  // The same reopen would give a client holding the read-only descriptor a
  // writable one: a memfd's inode is mode 0777. With no permission bits,
  // opening it again needs CAP_DAC_OVERRIDE (root); the descriptors already
  // open keep their access, and only the owner (memd) or CAP_FOWNER could
  // change the mode back.
  if (::fchmod(fd.get(), 0) != 0) return ErrnoStatus("fchmod(memfd, 0)", errno);
  std::unique_ptr<MemfdSegment> segment(
      new MemfdSegment(std::move(fd), std::move(read_only), bytes));
  void* address =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, segment->fd_.get(), 0);
  if (address == MAP_FAILED) return ErrnoStatus("mmap", errno);
  segment->mapping_ = address;  // Unmapped by the destructor from here on.
  if (pin) {
    if (::mlock(address, bytes) != 0) {
      int error = errno;
      return absl::ResourceExhaustedError(absl::StrCat(
          "pinned memory: cannot lock ", bytes, " bytes (", FormatBytes(bytes),
          "): mlock: ", std::strerror(error),
          "; raise the daemon's RLIMIT_MEMLOCK (LimitMEMLOCK= in systemd)"));
    }
    segment->locked_ = true;
  }
  return segment;
}

absl::Status MemfdSegment::Scrub() {
  const off_t length = static_cast<off_t>(size_);
  if (locked_) {
    // Locked pages stay in place: zero them through the daemon's mapping.
    std::memset(mapping_, 0, size_);
    return absl::OkStatus();
  }
  if (::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                  length) != 0) {
    return ErrnoStatus("fallocate(PUNCH_HOLE)", errno);
  }
  if (::fallocate(fd_.get(), 0, 0, length) != 0) {
    return ErrnoStatus("fallocate", errno);
  }
  return absl::OkStatus();
}

void MemfdSegment::Discard() {
  // Nobody mapping it keeps the pages: a client that touches them again
  // gets fresh zeroed pages, charged to that client's memory cgroup.
  // Punching a hole in a memfd that has no write seal fails only when
  // interrupted.
  while (::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                     static_cast<off_t>(size_)) != 0 &&
         errno == EINTR) {
  }
}

MemfdSegment::~MemfdSegment() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace memd::backend
