#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"

namespace memd::session {

/// One connected client of the session socket: its credentials, the token
/// its gRPC calls carry, and the socket descriptors travel over.
/// Owns the socket (closed when the last reference goes). Thread-safe.
class Session {
 public:
  Session(std::uint64_t id, std::string token, PeerCredentials peer,
          UniqueFd socket)
      : id_(id), token_(std::move(token)), peer_(std::move(peer)),
        socket_(std::move(socket)) {}

  std::uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  const PeerCredentials& peer() const { return peer_; }
  int socket_fd() const { return socket_.get(); }

  // Sends a duplicate of `fd` to the client and returns the sequence number
  // the client matches it with. Never blocks. Errors: UNAVAILABLE (the
  // client hung up, or stopped reading and its socket is full).
  absl::StatusOr<std::uint64_t> SendFd(int fd);

 private:
  const std::uint64_t id_;
  const std::string token_;
  const PeerCredentials peer_;
  const UniqueFd socket_;
  std::atomic<std::uint64_t> next_seq_{1};
};

}  // namespace memd::session
