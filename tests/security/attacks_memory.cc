// Attack steps on host memory: writing through a read-only lease. Also the
// victims' plain steps (publish, read) so that a test can play every user.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memd/client.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

// "refused: EACCES (Permission denied)" for a failed call.
std::string Refusal(int error) {
  const char* name = ::strerrorname_np(error);
  return absl::StrCat("refused: ", name != nullptr ? name : "?", " (",
                      std::strerror(error), ")");
}

}  // namespace

MEMD_ATTACK(write_through_read_lease,
            "NAME: opens NAME read-only (raw session), takes the memfd and tries "
            "every way to change its bytes: reopening it writable, mmap "
            "PROT_WRITE, mprotect, madvise(MADV_REMOVE), fallocate, ftruncate, "
            "write(2), sendfile(2) (libmemd's WriteFromFile path), fchmod. Prints '<path>: refused: ERRNO' or '<path>: WROTE' "
            "per path; exit 0 when all were refused, 4 when any wrote") {
  if (args.size() != 1) return 2;
  auto session = StepSession();
  if (!session) return 1;
  std::optional<LeaseWithDescriptor> opened = OpenWithDescriptor(*session, args[0], v1::READ);
  if (!opened) return 1;
  const int memfd = opened->fd.get();
  const std::size_t segment = opened->lease.handle().segment_bytes();

  // Each attempt returns 0 when it changed (or could change) shared bytes,
  // else the errno that stopped it.
  struct Attempt {
    const char* path;
    std::function<int()> run;
  };
  // A writable descriptor reaches the whole segment: the target and its
  // neighbours.
  const std::string scribble(segment, 'X');
  auto write_through = [&](int writable) {
    ssize_t wrote = ::pwrite(writable, scribble.data(), segment, 0);
    int error = wrote < 0 ? errno : 0;
    ::close(writable);
    return error;
  };
  auto reopen = [&](const std::string& path, int flags) {
    int writable = ::open(path.c_str(), flags | O_CLOEXEC);
    return writable < 0 ? errno : write_through(writable);
  };
  const std::string proc_fd = absl::StrCat("/proc/self/fd/", memfd);
  std::vector<Attempt> attempts = {
      {"reopen /proc/self/fd O_RDWR", [&] { return reopen(proc_fd, O_RDWR); }},
      {"reopen /proc/self/fd O_WRONLY", [&] { return reopen(proc_fd, O_WRONLY); }},
      {"mmap PROT_WRITE MAP_SHARED",
       [&] {
         void* map = ::mmap(nullptr, segment, PROT_READ | PROT_WRITE, MAP_SHARED,
                            memfd, 0);
         if (map == MAP_FAILED) return errno;
         std::memset(map, 'X', segment);
         ::munmap(map, segment);
         return 0;
       }},
      {"mprotect PROT_WRITE",
       [&] {
         void* map = ::mmap(nullptr, segment, PROT_READ, MAP_SHARED, memfd, 0);
         if (map == MAP_FAILED) return errno;
         int error = 0;
         if (::mprotect(map, segment, PROT_READ | PROT_WRITE) != 0) {
           error = errno;
         } else {
           std::memset(map, 'X', segment);
         }
         ::munmap(map, segment);
         return error;
       }},
      {"madvise MADV_REMOVE",
       [&] {
         void* map = ::mmap(nullptr, segment, PROT_READ, MAP_SHARED, memfd, 0);
         if (map == MAP_FAILED) return errno;
         int error = ::madvise(map, segment, MADV_REMOVE) != 0 ? errno : 0;
         ::munmap(map, segment);
         return error;
       }},
      {"fallocate PUNCH_HOLE",
       [&] {
         return ::fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                            static_cast<off_t>(segment)) != 0
                    ? errno
                    : 0;
       }},
      {"ftruncate 0", [&] { return ::ftruncate(memfd, 0) != 0 ? errno : 0; }},
      {"pwrite", [&] {
         return ::pwrite(memfd, scribble.data(), segment, 0) < 0 ? errno : 0;
       }},
      // What Buffer::WriteFromFile does with a kept descriptor, from a file
      // of the attacker's own.
      {"sendfile",
       [&] {
         const int source = ::memfd_create("scribble", MFD_CLOEXEC);
         if (source < 0) return errno;
         int error = 0;
         off_t from = 0;
         if (::pwrite(source, scribble.data(), segment, 0) < 0 ||
             ::sendfile(memfd, source, &from, segment) < 0) {
           error = errno;
         }
         ::close(source);
         return error;
       }},
      {"fchmod 0666, then reopen O_RDWR",
       [&] {
         if (::fchmod(memfd, 0666) != 0) return errno;
         return reopen(proc_fd, O_RDWR);
       }},
  };
  bool wrote = false;
  for (const Attempt& attempt : attempts) {
    const int error = attempt.run();
    wrote = wrote || error == 0;
    std::printf("%s: %s\n", attempt.path, error == 0 ? "WROTE" : Refusal(error).c_str());
  }
  std::fflush(stdout);
  return wrote ? 4 : 0;
}

}  // namespace memd::hostile
