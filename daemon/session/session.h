#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"
#include "common/session_codec.h"
#include "daemon/session/closer.h"

namespace memd::session {

/// What every session of a server shares, and may keep after the server is
/// gone: how many descriptors may wait unread in a session's socket (a
/// reload changes it) and the closer its socket goes to. Thread-safe.
struct SessionShared {
  explicit SessionShared(bool closes_inline) : closer(closes_inline) {}

  std::atomic<std::uint32_t> max_fds_in_flight{32};
  Closer closer;
};

/// One connected client of the session socket: its credentials, the token
/// its gRPC calls carry, and the socket descriptors, notices and the fast
/// control path's answers travel over (the SessionServer reads its calls).
/// Owns the socket (handed to the closer when the last reference goes).
/// Thread-safe.
class Session {
 public:
  Session(std::uint64_t id, std::string token, PeerCredentials peer,
          UniqueFd socket, std::shared_ptr<SessionShared> shared)
      : id_(id), token_(std::move(token)), peer_(std::move(peer)),
        socket_(std::move(socket)), shared_(std::move(shared)) {}
  ~Session() { shared_->closer.Close(std::move(socket_)); }

  std::uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  const PeerCredentials& peer() const { return peer_; }
  int socket_fd() const { return socket_.get(); }

  // Sends a duplicate of `fd` to the client and returns the sequence number
  // the client matches it with. Never blocks. Every descriptor in flight
  // counts against a per-user limit of the kernel's for memd's user, so a
  // session may have only max_fds_in_flight unread. Errors:
  // RESOURCE_EXHAUSTED (that many wait unread, with the numbers),
  // UNAVAILABLE (the client hung up, or its socket is full).
  absl::StatusOr<std::uint64_t> SendFd(int fd);

  // Tells the client that memd freed these buffers, which it opened asking
  // to hear of it (OpenRequest.notify_freed), in packets of at most
  // kMaxFreedIdsPerPacket ids and no descriptor. Never blocks. The packets
  // count against max_fds_in_flight like descriptors: a client that does
  // not read its socket gets no more of them. Errors: RESOURCE_EXHAUSTED
  // (that many packets wait unread: the rest are dropped), UNAVAILABLE (the
  // client hung up, or its socket is full).
  absl::Status SendFreed(const std::vector<std::uint64_t>& buffer_ids);

  // Answers a call of the fast control path, with a duplicate of `fd`
  // when >= 0 (a lease's descriptor) in the same packet. Never blocks.
  // Errors: as SendFd (an answer counts like a descriptor).
  absl::Status SendAnswer(const SessionAnswer& answer, int fd);

 private:
  // Descriptors sent and not yet read by the client, from the kernel's
  // accounting of the socket's queue (every packet of memd's costs the same).
  absl::StatusOr<std::uint64_t> FdsInFlight() const;
  // RESOURCE_EXHAUSTED, with the numbers, when max_fds_in_flight packets
  // wait unread; OK when fewer do, or when the kernel cannot say. Asks the
  // kernel only when what was counted last plus what was sent since could
  // reach the limit: only memd sends on the socket (under send_mu_), so its
  // queue can only have shrunk since the count. Call Sent() after a packet
  // went.
  absl::Status CheckInFlight() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_);
  void Sent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_mu_) { ++sent_since_count_; }

  const std::uint64_t id_;
  const std::string token_;
  const PeerCredentials peer_;
  UniqueFd socket_;
  const std::shared_ptr<SessionShared> shared_;
  // Sends one at a time, so that the in-flight check holds exactly.
  absl::Mutex send_mu_;
  std::uint64_t next_seq_ ABSL_GUARDED_BY(send_mu_) = 1;
  // Packets unread at the kernel's last count, and packets sent since: an
  // upper bound of what waits unread now. Unknown (the most) before the
  // first count: the server's hello went before the session was made.
  std::uint64_t counted_in_flight_ ABSL_GUARDED_BY(send_mu_) =
      std::numeric_limits<std::uint32_t>::max();
  std::uint64_t sent_since_count_ ABSL_GUARDED_BY(send_mu_) = 0;
};

}  // namespace memd::session
