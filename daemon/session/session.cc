#include "daemon/session/session.h"

#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/session_codec.h"
#include "common/status_macros.h"

namespace memd::session {
namespace {

// What the kernel charges a socket for one unread descriptor packet of
// memd's (its accounting size: the buffer the few bytes sit in), measured
// once on a socket pair. Every packet memd sends is a few dozen bytes, so
// they all cost the same.
std::size_t PacketCharge() {
  static const std::size_t charge = [] {
    constexpr std::size_t kUsual = 768;  // x86-64, Linux 6.x.
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      return kUsual;
    }
    UniqueFd ours(pair[0]), theirs(pair[1]);
    const std::string longest = EncodeSessionMessage(SessionFd{~std::uint64_t{0}});
    absl::StatusOr<std::size_t> unread =
        SendPacket(ours.get(), longest, theirs.get(),
                   MSG_DONTWAIT)
                .ok()
            ? UnreadBytes(ours.get())
            : absl::StatusOr<std::size_t>(0);
    return unread.ok() && *unread > 0 ? *unread : kUsual;
  }();
  return charge;
}

}  // namespace

absl::StatusOr<std::uint64_t> Session::FdsInFlight() const {
  absl::StatusOr<std::size_t> unread = UnreadBytes(socket_.get());
  if (!unread.ok()) return unread.status();
  const std::size_t charge = PacketCharge();
  return (*unread + charge - 1) / charge;
}

absl::Status Session::CheckInFlight() {
  const std::uint32_t limit =
      shared_->max_fds_in_flight.load(std::memory_order_relaxed);
  if (counted_in_flight_ + sent_since_count_ < limit) return absl::OkStatus();
  absl::StatusOr<std::uint64_t> in_flight = FdsInFlight();
  if (!in_flight.ok()) return absl::OkStatus();
  counted_in_flight_ = *in_flight;
  sent_since_count_ = 0;
  if (*in_flight >= limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "session ", id_, " (pid ", peer_.pid, ", uid ", peer_.uid, ") has ",
        *in_flight, " packets (descriptors, notices) it has not read from its session socket; at "
        "most ", limit, " may wait (max_fds_in_flight_per_session): the client "
        "must read the session socket (libmemd does)"));
  }
  return absl::OkStatus();
}

absl::Status Session::SendFreed(const std::vector<std::uint64_t>& buffer_ids) {
  absl::MutexLock lock(&send_mu_);
  for (std::size_t at = 0; at < buffer_ids.size(); at += kMaxFreedIdsPerPacket) {
    MEMD_RETURN_IF_ERROR(CheckInFlight());
    const std::size_t end = std::min(buffer_ids.size(), at + kMaxFreedIdsPerPacket);
    SessionFreed freed{{buffer_ids.begin() + at, buffer_ids.begin() + end}};
    MEMD_RETURN_IF_ERROR(
        SendPacket(socket_.get(), EncodeSessionMessage(freed), -1, MSG_DONTWAIT));
    Sent();
  }
  return absl::OkStatus();
}

absl::Status Session::SendAnswer(const SessionAnswer& answer, int fd) {
  absl::MutexLock lock(&send_mu_);
  MEMD_RETURN_IF_ERROR(CheckInFlight());
  MEMD_RETURN_IF_ERROR(
      SendPacket(socket_.get(), EncodeSessionMessage(answer), fd, MSG_DONTWAIT));
  Sent();
  return absl::OkStatus();
}

absl::StatusOr<std::uint64_t> Session::SendFd(int fd) {
  absl::MutexLock lock(&send_mu_);
  MEMD_RETURN_IF_ERROR(CheckInFlight());
  const std::uint64_t seq = next_seq_;
  absl::Status sent = SendPacket(socket_.get(), EncodeSessionMessage(SessionFd{seq}),
                                fd, MSG_DONTWAIT);
  if (!sent.ok()) return sent;
  Sent();
  return next_seq_++;
}

}  // namespace memd::session
