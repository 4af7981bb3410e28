#include "daemon/backend/host/memfd_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"
#include "common/errno_status.h"
#include "common/numa.h"
#include "common/status_macros.h"

namespace memd::backend {

namespace {

// fallocate over the whole memfd: commits every page not committed yet.
absl::Status Commit(int fd, std::uint64_t bytes) {
  int rc;
  do {
    rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return absl::OkStatus();
  const int error = errno;
  if (error == ENOSPC || error == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "host memory: cannot commit ", bytes, " bytes (", FormatBytes(bytes),
        "): fallocate: ", std::strerror(error)));
  }
  return ErrnoStatus("fallocate", error);
}

// Gives the empty memfd its size and the shared memory policy of `node`.
// mbind needs a mapping, but the policy it sets on a MAP_SHARED mapping of
// shmem belongs to the object and outlives the mapping; no page exists yet
// (ftruncate allocates none), so fallocate places every one.
absl::Status PlaceOnNode(int fd, std::uint64_t bytes, int node) {
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return ErrnoStatus("ftruncate", errno);
  void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return ErrnoStatus("mmap", errno);
  absl::Status placed = numa::PreferNode(address, bytes, node);
  ::munmap(address, bytes);
  return placed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemfdSegment>> MemfdSegment::Create(
    std::uint64_t bytes, bool pin, int numa_node) {
  UniqueFd fd(::memfd_create(pin ? "memd:pinned" : "memd:host",
                             MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return ErrnoStatus("memfd_create", errno);
  if (numa_node >= 0) MEMD_RETURN_IF_ERROR(PlaceOnNode(fd.get(), bytes, numa_node));
  // fallocate commits the pages now: out of memory is an error here, not a
  // SIGBUS in a client later.
  if (absl::Status committed = Commit(fd.get(), bytes); !committed.ok()) return committed;
  if (::fcntl(fd.get(), F_ADD_SEALS, kSeals) != 0) {
    return ErrnoStatus("fcntl(F_ADD_SEALS)", errno);
  }
  return Finish(std::move(fd), bytes, pin);
}

absl::StatusOr<std::unique_ptr<MemfdSegment>> MemfdSegment::Adopt(UniqueFd fd,
                                                                  std::uint64_t bytes,
                                                                  bool pin) {
  // Only memfds have seals: anything else is refused (EINVAL).
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  char target[64] = {};
  const std::string link = absl::StrCat("/proc/self/fd/", fd.get());
  const ssize_t length = ::readlink(link.c_str(), target, sizeof(target) - 1);
  const absl::string_view name(target, length > 0 ? static_cast<std::size_t>(length) : 0);
  if (seals < 0 || !absl::StartsWith(name, "/memfd:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "descriptor ", fd.get(), " (", name, ") is not a memfd: a host segment's ",
        "descriptor is one"));
  }
  if (seals != kSeals) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "memfd %d has seals 0x%x, not 0x%x (shrink, grow, seal) as memd seals "
        "its segments",
        fd.get(), seals, kSeals));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0) return ErrnoStatus("fcntl(F_GETFL)", errno);
  if ((flags & O_ACCMODE) != O_RDWR) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memfd ", fd.get(), " is not open read-write: a segment is adopted from ",
        "its read-write descriptor (Segment::DurableFd)"));
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return ErrnoStatus("fstat", errno);
  if (static_cast<std::uint64_t>(info.st_size) != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memfd ", fd.get(), " holds ", info.st_size, " bytes, not the segment's ",
        bytes));
  }
  // Reserve's promise holds for adopted memory too: pages the earlier memd
  // committed are still there (nothing punched them while the segment was
  // in a pool), and any that are not are committed now, not faulted later.
  if (absl::Status committed = Commit(fd.get(), bytes); !committed.ok()) return committed;
  return Finish(std::move(fd), bytes, pin);
}

absl::StatusOr<std::unique_ptr<MemfdSegment>> MemfdSegment::Finish(UniqueFd fd,
                                                                   std::uint64_t bytes,
                                                                   bool pin) {
  // A memfd has no path to reopen but its /proc/self/fd link; opening that
  // O_RDONLY makes a new open file description that mmap refuses to map
  // writable, while sharing the same pages. An adopted memfd's inode is
  // mode 0 already (below): owner-read for the moment of the reopen, which
  // grants nobody more than reading. fchmod needs memd to own the inode: an
  // adopting memd must run as the same user as the one that created it.
  if (::fchmod(fd.get(), 0400) != 0) return ErrnoStatus("fchmod(memfd, 0400)", errno);
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
