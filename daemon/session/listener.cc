#include "daemon/session/listener.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace memd::session {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(10);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

}  // namespace

Listener::Listener(UniqueFd socket, std::string name)
    : socket_(std::move(socket)), name_(std::move(name)), backoff_(kFirstBackoff) {}

std::optional<UniqueFd> Listener::Accept(absl::Time now) {
  for (;;) {
    UniqueFd fd(::accept4(socket_.get(), nullptr, nullptr,
                          SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd) {
      backoff_ = kFirstBackoff;
      return fd;
    }
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;
    if (error == EAGAIN) return std::nullopt;
    // Running out of descriptors or memory is what a flood of connections
    // causes; anything else is as unexpected. Either way, wait before the
    // next try instead of spinning on a listener that stays readable.
    log_.Warn(now, absl::StrCat(name_, ": accept: ", std::strerror(error),
                                "; pausing for ", absl::FormatDuration(backoff_)));
    paused_until_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
    return std::nullopt;
  }
}

}  // namespace memd::session
