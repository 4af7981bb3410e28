#include "daemon/session/session.h"

#include <sys/socket.h>

#include "memd/v1/memd.pb.h"

namespace memd::session {

absl::StatusOr<std::uint64_t> Session::SendFd(int fd) {
  const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  v1::SessionMessage message;
  message.mutable_fd()->set_seq(seq);
  absl::Status sent =
      SendPacket(socket_.get(), message.SerializeAsString(), fd, MSG_DONTWAIT);
  if (!sent.ok()) return sent;
  return seq;
}

}  // namespace memd::session
