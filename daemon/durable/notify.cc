#include "daemon/durable/notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"

namespace memd::durable {
namespace {

constexpr std::size_t kScmMaxFd = 253;

// The manager's address for a path ("/run/systemd/notify") or an abstract
// name ("@..."), and its length; 0 when `socket` is neither.
socklen_t AddressOf(const std::string& socket, sockaddr_un& address) {
  address = {};
  address.sun_family = AF_UNIX;
  if (socket.empty() || (socket[0] != '/' && socket[0] != '@')) return 0;
  if (socket.size() > sizeof(address.sun_path)) return 0;
  std::memcpy(address.sun_path, socket.data(), socket.size());
  if (socket[0] == '@') address.sun_path[0] = '\0';
  // A path ends at its NUL; an abstract name is exactly its bytes.
  const std::size_t length = socket[0] == '@' ? socket.size() : socket.size() + 1;
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) +
                                std::min(length, sizeof(address.sun_path)));
}

absl::Status ThroughLibsystemd(const std::string& state, std::span<const int> fds) {
  const int result = sd_pid_notify_with_fds(0, 0, state.c_str(), fds.data(),
                                            static_cast<unsigned>(fds.size()));
  if (result < 0) return ErrnoStatus("sd_pid_notify_with_fds", -result);
  if (result == 0) return absl::FailedPreconditionError("NOTIFY_SOCKET is not set");
  return absl::OkStatus();
}

}  // namespace

absl::Status NotifyServiceManager(std::string_view state, std::span<const int> fds,
                                  absl::Duration timeout) {
  if (fds.size() > kScmMaxFd) {
    return absl::InvalidArgumentError(absl::StrCat(
        fds.size(), " descriptors in one message; the kernel passes at most ", kScmMaxFd));
  }
  const char* variable = std::getenv("NOTIFY_SOCKET");
  if (variable == nullptr || variable[0] == '\0') {
    return absl::FailedPreconditionError("NOTIFY_SOCKET is not set");
  }
  const std::string socket = variable;
  const std::string message(state);
  sockaddr_un address;
  const socklen_t address_length = AddressOf(socket, address);
  if (address_length == 0) {
    if (socket[0] == '/' || socket[0] == '@') {
      return absl::InvalidArgumentError(absl::StrCat(
          "NOTIFY_SOCKET ", socket, " is longer than a socket address (",
          sizeof(address.sun_path), " bytes)"));
    }
    return ThroughLibsystemd(message, fds);
  }

  UniqueFd sender(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sender) return ErrnoStatus("socket(AF_UNIX, SOCK_DGRAM)", errno);
  // The kernel waits this long for room in the manager's queue, then
  // answers EAGAIN.
  const timeval wait = absl::ToTimeval(std::max(timeout, absl::Microseconds(1)));
  if (::setsockopt(sender.get(), SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)) != 0) {
    return ErrnoStatus("setsockopt(SO_SNDTIMEO)", errno);
  }

  iovec text{const_cast<char*>(message.data()), message.size()};
  msghdr header{};
  header.msg_name = &address;
  header.msg_namelen = address_length;
  header.msg_iov = &text;
  header.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
    header.msg_control = control.data();
    header.msg_controllen = control.size();
    cmsghdr* rights = CMSG_FIRSTHDR(&header);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(rights), fds.data(), sizeof(int) * fds.size());
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (::sendmsg(sender.get(), &header, MSG_NOSIGNAL) >= 0) return absl::OkStatus();
    const int error = errno;
    // A signal cut the wait short: wait the rest.
    if (error == EINTR && absl::Now() < deadline) {
      const timeval rest = absl::ToTimeval(deadline - absl::Now());
      ::setsockopt(sender.get(), SOL_SOCKET, SO_SNDTIMEO, &rest, sizeof(rest));
      continue;
    }
    if (error == EAGAIN || error == EWOULDBLOCK || error == EINTR) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the service manager at ", socket, " took no message for ",
          absl::FormatDuration(timeout), " (its queue is full: it reads no more)"));
    }
    return ErrnoStatus(absl::StrCat("sendmsg to NOTIFY_SOCKET ", socket), error);
  }
}

}  // namespace memd::durable
