#include "daemon/durable/fd_store.h"

#include <fcntl.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"

extern char** environ;

namespace memd::durable {
namespace {

absl::string_view Absl(std::string_view text) { return {text.data(), text.size()}; }

absl::Status CheckName(std::string_view name) {
  if (FdNameIsValid(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "descriptor name \"", absl::CEscape(Absl(name)),
      "\" is not 1-255 printable ASCII characters without ':'"));
}

// A failed libsystemd call: it returns -errno.
absl::Status SdStatus(std::string_view call, int result) {
  return ErrnoStatus(call, -result);
}

// Sends through libsystemd with pid 0 (the kernel's credentials of this
// process, which the manager checks against the main pid) and without
// unsetting NOTIFY_SOCKET. libsystemd opens a socket per call, so this is
// thread-safe without a lock.
class NotifySocketStore final : public FdStore {
 public:
  absl::Status Store(std::string_view name, int fd) override {
    return StoreMany(name, std::span<const int>(&fd, 1));
  }

  absl::Status StoreMany(std::string_view name, std::span<const int> fds) override {
    if (auto status = CheckName(name); !status.ok()) return status;
    if (fds.size() > kMaxFdsPerMessage) {
      return absl::InvalidArgumentError(absl::StrCat(
          fds.size(), " descriptors in one message; the kernel passes at most ",
          kMaxFdsPerMessage));
    }
    for (int fd : fds) {
      if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("descriptor ", fd));
    }
    if (fds.empty()) return absl::OkStatus();
    const std::string message = absl::StrCat("FDSTORE=1\nFDNAME=", Absl(name));
    const int result = sd_pid_notify_with_fds(0, 0, message.c_str(), fds.data(),
                                              static_cast<unsigned>(fds.size()));
    return Sent(result, "sd_pid_notify_with_fds(FDSTORE=1)");
  }

  absl::Status Remove(std::string_view name) override {
    if (auto status = CheckName(name); !status.ok()) return status;
    const std::string message = absl::StrCat("FDSTOREREMOVE=1\nFDNAME=", Absl(name));
    return Sent(sd_pid_notify(0, 0, message.c_str()), "sd_pid_notify(FDSTOREREMOVE=1)");
  }

 private:
  static absl::Status Sent(int result, std::string_view call) {
    if (result < 0) return SdStatus(call, result);
    // 0: libsystemd found no NOTIFY_SOCKET, which was set when this store
    // was made; someone unset it since.
    if (result == 0) return absl::FailedPreconditionError("NOTIFY_SOCKET is no longer set");
    return absl::OkStatus();
  }
};

bool IsListenVariable(const char* entry) {
  return absl::StartsWith(entry, "LISTEN_FDS=") || absl::StartsWith(entry, "LISTEN_FDNAMES=") ||
         absl::StartsWith(entry, "LISTEN_PID=");
}

}  // namespace

bool FdNameIsValid(std::string_view name) {
  if (name.empty() || name.size() > kMaxFdNameLength) return false;
  for (char c : name) {
    if (c < ' ' || c > '~' || c == ':') return false;
  }
  return true;
}

std::unique_ptr<FdStore> ServiceManagerStore() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || socket[0] == '\0') return nullptr;
  return std::make_unique<NotifySocketStore>();
}

absl::StatusOr<std::vector<ListenedFd>> TakeListenedFds() {
  char** names = nullptr;
  const int count = sd_listen_fds_with_names(1, &names);
  if (count < 0) return SdStatus("sd_listen_fds_with_names", count);
  std::vector<ListenedFd> taken;
  taken.reserve(count);
  for (int i = 0; i < count; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    // libsystemd sets CLOEXEC too; done here again so the promise does not
    // rest on a library detail.
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    taken.push_back({names != nullptr && names[i] != nullptr ? names[i] : "unknown",
                     UniqueFd(fd)});
  }
  if (names != nullptr) {
    for (char** name = names; *name != nullptr; ++name) std::free(*name);
    std::free(names);
  }
  return taken;
}

absl::Status ExecWithFds(const std::string& path, const std::vector<std::string>& argv,
                         std::span<const PassedFd> fds) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<std::string> names;
  for (const PassedFd& passed : fds) {
    if (auto status = CheckName(passed.name); !status.ok()) return status;
    if (passed.fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat("descriptor ", passed.fd));
    }
    names.emplace_back(passed.name);
  }

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!IsListenVariable(*entry)) environment.emplace_back(*entry);
  }
  const int count = static_cast<int>(fds.size());
  if (count > 0) {
    environment.push_back(absl::StrCat("LISTEN_FDS=", count));
    environment.push_back(absl::StrCat("LISTEN_FDNAMES=", absl::StrJoin(names, ":")));
    environment.push_back(absl::StrCat("LISTEN_PID=", ::getpid()));
  }
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& arg : args) argp.push_back(arg.data());
  argp.push_back(nullptr);

  // Copies of the sources above every target first, so that moving one
  // source onto its target cannot overwrite another source still to move
  // (fd 4 going to 3 while fd 3 goes to 4). They are CLOEXEC: the exec
  // closes them.
  const int first = SD_LISTEN_FDS_START;
  const int above = first + count;
  std::vector<UniqueFd> copies;
  for (const PassedFd& passed : fds) {
    UniqueFd copy(::fcntl(passed.fd, F_DUPFD_CLOEXEC, above));
    if (!copy) return ErrnoStatus("fcntl(F_DUPFD_CLOEXEC)", errno);
    copies.push_back(std::move(copy));
  }
  // What the targets held, to put back if the exec fails.
  struct Saved {
    UniqueFd fd;  // Invalid: the target was closed.
    int flags = 0;
  };
  std::vector<Saved> saved(count);
  for (int i = 0; i < count; ++i) {
    const int flags = ::fcntl(first + i, F_GETFD);
    if (flags < 0) continue;
    saved[i].flags = flags;
    saved[i].fd.reset(::fcntl(first + i, F_DUPFD_CLOEXEC, above));
    if (!saved[i].fd) return ErrnoStatus("fcntl(F_DUPFD_CLOEXEC)", errno);
  }
  auto restore = [&](int moved) {
    for (int i = 0; i < moved; ++i) {
      if (saved[i].fd) {
        ::dup2(saved[i].fd.get(), first + i);
        ::fcntl(first + i, F_SETFD, saved[i].flags);
      } else {
        ::close(first + i);
      }
    }
  };
  for (int i = 0; i < count; ++i) {
    // dup2 leaves the new descriptor without CLOEXEC: inherited.
    if (::dup2(copies[i].get(), first + i) < 0) {
      const int error = errno;
      restore(i);
      return ErrnoStatus("dup2", error);
    }
  }
  ::execve(path.c_str(), argp.data(), envp.data());
  const int error = errno;
  restore(count);
  return ErrnoStatus(absl::StrCat("execve ", path), error);
}

}  // namespace memd::durable
