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
#include "daemon/durable/handoff.h"
#include "daemon/durable/notify.h"

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

// Sends through NotifyServiceManager: the kernel's credentials of this
// process, which the manager checks against the main pid, NOTIFY_SOCKET left
// set, and a bounded wait for a manager that reads no more. A socket per
// call, so this is thread-safe without a lock.
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
    return Sent(NotifyServiceManager(message, fds), "FDSTORE=1");
  }

  absl::Status Remove(std::string_view name) override {
    if (auto status = CheckName(name); !status.ok()) return status;
    const std::string message = absl::StrCat("FDSTOREREMOVE=1\nFDNAME=", Absl(name));
    return Sent(NotifyServiceManager(message), "FDSTOREREMOVE=1");
  }

 private:
  static absl::Status Sent(const absl::Status& sent, std::string_view what) {
    if (sent.ok()) return sent;
    // NOTIFY_SOCKET was set when this store was made; someone unset it since.
    if (absl::IsFailedPrecondition(sent)) {
      return absl::FailedPreconditionError("NOTIFY_SOCKET is no longer set");
    }
    return absl::Status(sent.code(), absl::StrCat(Absl(what), ": ", sent.message()));
  }
};

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
  auto handed_off = TakeHandedOffFds();
  if (!handed_off.ok()) return handed_off.status();
  for (ListenedFd& fd : *handed_off) taken.push_back(std::move(fd));
  return taken;
}

}  // namespace memd::durable
