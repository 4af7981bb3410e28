#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace memd {

// Who is on the other end of a Unix socket, as the kernel reports it.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups (SO_PEERGROUPS); includes `gid` where the kernel does.
  std::vector<gid_t> groups;
};

// One packet read from a SOCK_SEQPACKET socket and the descriptor that came
// with it, if any.
struct ReceivedPacket {
  std::string bytes;
  UniqueFd fd;
};

// Creates, binds and listens on a Unix socket of `type` (SOCK_STREAM,
// SOCK_SEQPACKET) at `path`, with `mode` permission bits. Errors: the errno
// mapping of ErrnoStatus; INVALID_ARGUMENT when the path is too long.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type,
                                    unsigned mode, int backlog = 128);

// Connects a CLOEXEC socket of `type` to `path`. Errors: UNAVAILABLE when
// nothing listens there (ENOENT, ECONNREFUSED: NoListenerError), else the
// errno mapping.
absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path, int type);

// UNAVAILABLE: no memd listens on `path` (`error`: ENOENT, ENOTDIR,
// ECONNREFUSED), marked so that IsNoListener tells it from other failures.
absl::Status NoListenerError(const std::string& path, int error);

// Whether `status` came from NoListenerError (or a copy of it that kept its
// payloads): nothing there, as opposed to something there that failed. The
// errno text, when so.
std::optional<std::string> IsNoListener(const absl::Status& status);

// Reads SO_PEERCRED and SO_PEERGROUPS of a connected Unix socket.
absl::StatusOr<PeerCredentials> GetPeerCredentials(int socket_fd);

// Sends one packet with an optional descriptor (SCM_RIGHTS; fd < 0 sends
// none). Never raises SIGPIPE. `flags` go to sendmsg (MSG_DONTWAIT...).
// Errors: UNAVAILABLE when the peer is gone or the socket is full (EAGAIN),
// else the errno mapping.
absl::Status SendPacket(int socket_fd, std::string_view bytes, int fd,
                        int flags = 0);

// Receives one packet of at most `max_bytes` and at most one descriptor;
// extra or truncated descriptors are closed and reported as DATA_LOSS.
// Returns std::nullopt when no packet is waiting on a non-blocking read, or
// none came within the socket's receive timeout (SO_RCVTIMEO).
// Errors: UNAVAILABLE when the peer hung up, the errno mapping otherwise.
absl::StatusOr<std::optional<ReceivedPacket>> ReceivePacket(
    int socket_fd, std::size_t max_bytes, int flags = 0);

// Receives the packets waiting on `socket_fd` without waiting, in one system
// call (recvmmsg): as many as `scratch` holds at `max_bytes` each (64 at
// most), each checked as ReceivePacket checks one. A server woken for a
// socket takes what is there at once instead of a read, and another wake-up
// and read, per packet. Empty when none waits. The end of the stream is the
// last entry, UNAVAILABLE; a malformed packet is its entry's DATA_LOSS, and
// the packets after it still come. Errors: INVALID_ARGUMENT when `scratch`
// holds no packet of `max_bytes`, else the errno mapping of recvmmsg.
absl::StatusOr<std::vector<absl::StatusOr<ReceivedPacket>>> ReceiveWaitingPackets(
    int socket_fd, std::span<char> scratch, std::size_t max_bytes);

// Makes `listener` (and so every socket it accepts: the kernel copies the
// setting at connect time) refuse descriptors: a peer's SCM_RIGHTS send
// fails with EPERM (SO_PASSRIGHTS, Linux 6.16). A process that receives a
// descriptor may be the one whose close() releases it, and some closes block
// for as long as the sender likes (a lingering TCP socket, a FUSE file).
// Errors: UNIMPLEMENTED when the kernel lacks the option, else the errno
// mapping.
absl::Status RefuseDescriptors(int listener);

// Bytes this socket sent that its peer has not read yet (SIOCOUTQ; for Unix
// sockets the kernel's accounting size of the queued packets). Errors: the
// errno mapping.
absl::StatusOr<std::size_t> UnreadBytes(int socket_fd);

}  // namespace memd
