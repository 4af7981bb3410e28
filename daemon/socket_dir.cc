#include "daemon/socket_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

std::string PathInDir(int dir_fd, const std::string& name) {
  return absl::StrCat("/proc/self/fd/", dir_fd, "/", name);
}

// Opens `dir` itself (not what a link there points to) and checks that
// nobody but this daemon's user and root could have put anything in it.
absl::StatusOr<UniqueFd> OpenTrustedDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int error = errno;
    if (error == ELOOP || error == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket directory ", dir,
          " is a symbolic link or not a directory; memd serves only from a real "
          "directory: remove it or choose another --socket-dir"));
    }
    return ErrnoStatus(absl::StrCat("open ", dir), error);
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return ErrnoStatus(absl::StrCat("stat ", dir), errno);
  const uid_t self = ::geteuid();
  const std::string mode = absl::StrFormat("%04o", info.st_mode & 07777);
  if (info.st_uid != self && info.st_uid != 0) {
    const std::string rightful = self == 0 ? std::string("root, memd's user")
                                           : absl::StrCat("memd's uid ", self, " or root");
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", dir, " belongs to uid ", info.st_uid, " (mode ", mode,
        "), not to ", rightful,
        ": another user may have made it to capture memd's clients or files; "
        "remove it (or choose another --socket-dir) and start memd again"));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", dir, " (owner uid ", info.st_uid, ") has mode ", mode,
        ": group or other users may write it and replace memd's sockets or lock "
        "file; run `chmod go-w ", dir, "` (or choose another --socket-dir)"));
  }
  return fd;
}

std::string ReadPid(int fd) {
  char text[32] = {};
  ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
  if (got <= 0) return "unknown";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(text, got)));
}

// A socket file is stale when nothing accepts connections on it; anything
// else under a socket's name (a link, a file) is removed, never followed.
absl::Status RemoveIfStale(int dir_fd, const std::string& dir, const char* name,
                           int type) {
  const std::string path = absl::StrCat(dir, "/", name);
  struct stat info;
  if (::fstatat(dir_fd, name, &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(absl::StrCat("stat ", path), errno);
  }
  if (S_ISSOCK(info.st_mode) && ConnectUnix(PathInDir(dir_fd, name), type).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another memd is accepting connections on ", path, "; stop it first"));
  }
  spdlog::info("removing stale {} {}", S_ISSOCK(info.st_mode) ? "socket" : "entry", path);
  if (::unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("unlink ", path), errno);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketDir>> SocketDir::Claim(const std::string& dir) {
  if (auto made = MakeDirs(dir); !made.ok()) return made;
  absl::StatusOr<UniqueFd> dir_fd = OpenTrustedDir(dir);
  if (!dir_fd.ok()) return dir_fd.status();
  std::string lock_path = absl::StrCat(dir, "/", kLockName);
  UniqueFd lock(::openat(dir_fd->get(), kLockName,
                         O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!lock) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          lock_path, " is a symbolic link; memd does not follow it: remove it"));
    }
    return ErrnoStatus(absl::StrCat("open ", lock_path), errno);
  }
  struct stat lock_info;
  if (::fstat(lock.get(), &lock_info) != 0 || !S_ISREG(lock_info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(lock_path, " is not a regular file: remove it"));
  }
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
  if (auto stale = RemoveIfStale(dir_fd->get(), dir, kControlSocketName, SOCK_STREAM);
      !stale.ok()) {
    return stale;
  }
  if (auto stale =
          RemoveIfStale(dir_fd->get(), dir, kSessionSocketName, SOCK_SEQPACKET);
      !stale.ok()) {
    return stale;
  }
  return std::unique_ptr<SocketDir>(
      new SocketDir(dir, std::move(*dir_fd), std::move(lock)));
}

std::string SocketDir::InDir(const std::string& name) const {
  return PathInDir(dir_fd_.get(), name);
}

absl::StatusOr<UniqueFd> SocketDir::Listen(std::string_view name, int type,
                                           unsigned mode, int backlog) const {
  // absl::StrCat takes absl::string_view, which is not std::string_view here.
  const std::string name_string(name);
  const std::string shown = absl::StrCat(dir_, "/", name_string);
  const std::string path = InDir(name_string);
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket", errno);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket name too long: ", shown));
  }
  path.copy(address.sun_path, path.size());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return ErrnoStatus(absl::StrCat("bind ", shown), errno);
  }
  // Before listen: nobody can connect while the mode is still the umask's.
  if (::fchmodat(dir_fd_.get(), name_string.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus(absl::StrCat("chmod ", shown), errno);
  }
  if (::listen(fd.get(), backlog) != 0) {
    return ErrnoStatus(absl::StrCat("listen ", shown), errno);
  }
  return fd;
}

SocketDir::~SocketDir() {
  for (const char* name : {kControlSocketName, kSessionSocketName, kLockName}) {
    ::unlinkat(dir_fd_.get(), name, 0);
  }
}

}  // namespace memd
