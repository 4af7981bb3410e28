#include "daemon/socket_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "common/paths.h"
#include "common/unix_socket.h"
#include "spdlog/spdlog.h"

namespace memd {
namespace {

constexpr char kLockName[] = "memd.lock";

absl::Status MakeDirs(const std::string& dir) {
  for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("mkdir ", prefix), errno);
    }
    if (slash == std::string::npos) return absl::OkStatus();
  }
}

std::string ReadPid(int fd) {
  char text[32] = {};
  ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
  if (got <= 0) return "unknown";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(text, got)));
}

// A socket file is stale when nothing accepts connections on it.
absl::Status RemoveIfStale(const std::string& path, int type) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(absl::StrCat("stat ", path), errno);
  }
  if (ConnectUnix(path, type).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another memd is accepting connections on ", path, "; stop it first"));
  }
  spdlog::info("removing stale socket {}", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("unlink ", path), errno);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketDir>> SocketDir::Claim(const std::string& dir) {
  if (auto made = MakeDirs(dir); !made.ok()) return made;
  std::string lock_path = absl::StrCat(dir, "/", kLockName);
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock) return ErrnoStatus(absl::StrCat("open ", lock_path), errno);
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another memd (pid ", ReadPid(lock.get()), ") is serving ", dir,
          "; stop it first or choose another --socket-dir"));
    }
    return ErrnoStatus(absl::StrCat("flock ", lock_path), errno);
  }
  std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(lock.get(), 0) != 0 ||
      ::pwrite(lock.get(), pid.data(), pid.size(), 0) !=
          static_cast<ssize_t>(pid.size())) {
    return ErrnoStatus(absl::StrCat("write ", lock_path), errno);
  }
  // The lock is ours, yet a daemon from before locks existed, or one whose
  // lock file was deleted, could still listen: ask the sockets themselves.
  if (auto stale = RemoveIfStale(ControlSocketPath(dir), SOCK_STREAM); !stale.ok()) {
    return stale;
  }
  if (auto stale = RemoveIfStale(SessionSocketPath(dir), SOCK_SEQPACKET);
      !stale.ok()) {
    return stale;
  }
  return std::unique_ptr<SocketDir>(new SocketDir(dir, std::move(lock)));
}

SocketDir::~SocketDir() {
  ::unlink(ControlSocketPath(dir_).c_str());
  ::unlink(SessionSocketPath(dir_).c_str());
  ::unlink(absl::StrCat(dir_, "/", kLockName).c_str());
}

}  // namespace memd
