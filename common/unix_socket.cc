#include "common/unix_socket.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

// Debian 12's headers predate the option; the number is the kernel's ABI.
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif

namespace memd {
namespace {

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path '", path, "' is ", path.size(),
                     " bytes long; the limit is ",
                     sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

}  // namespace

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type,
                                    unsigned mode, int backlog) {
  auto address = UnixAddress(path);
  if (!address.ok()) return address.status();
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket", errno);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address),
             sizeof(*address)) != 0) {
    return ErrnoStatus(absl::StrCat("bind ", path), errno);
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return ErrnoStatus(absl::StrCat("chmod ", path), errno);
  }
  if (::listen(fd.get(), backlog) != 0) {
    return ErrnoStatus(absl::StrCat("listen ", path), errno);
  }
  return fd;
}

absl::StatusOr<UniqueFd> ConnectUnix(const std::string& path, int type) {
  auto address = UnixAddress(path);
  if (!address.ok()) return address.status();
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket", errno);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*address),
                sizeof(*address)) != 0) {
    int error = errno;
    if (error == ENOENT || error == ECONNREFUSED) return NoListenerError(path, error);
    return ErrnoStatus(absl::StrCat("connect ", path), error);
  }
  return fd;
}

namespace {
constexpr char kNoListenerPayload[] = "memd/no-listener";
}  // namespace

absl::Status NoListenerError(const std::string& path, int error) {
  absl::Status status = absl::UnavailableError(absl::StrCat(
      "no memd listens on ", path, " (", std::strerror(error),
      "); is the daemon running, and is the socket directory right?"));
  status.SetPayload(kNoListenerPayload, absl::Cord(std::strerror(error)));
  return status;
}

std::optional<std::string> IsNoListener(const absl::Status& status) {
  absl::optional<absl::Cord> why = status.GetPayload(kNoListenerPayload);
  if (!why.has_value()) return std::nullopt;
  return std::string(*why);
}

absl::StatusOr<PeerCredentials> GetPeerCredentials(int socket_fd) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return ErrnoStatus("getsockopt(SO_PEERCRED)", errno);
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  std::vector<gid_t> groups(64);
  for (;;) {
    length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(),
                     &length) == 0) {
      groups.resize(length / sizeof(gid_t));
      break;
    }
    if (errno != ERANGE) return ErrnoStatus("getsockopt(SO_PEERGROUPS)", errno);
    groups.resize(length / sizeof(gid_t) + 1);
  }
  peer.groups = std::move(groups);
  return peer;
}

namespace {

// Why a packet did not go (`call` failed with `error`): a full socket
// (EAGAIN) says what it means.
absl::Status SendFailed(const char* call, int error) {
  if (error == EAGAIN) {
    return absl::UnavailableError("the session socket is full: the peer is not reading it");
  }
  return ErrnoStatus(call, error);
}

}  // namespace

absl::Status SendPacket(int socket_fd, std::string_view bytes, int fd,
                        int flags) {
  if (fd < 0) {
    // No descriptor: send(2), which spares the kernel copying in and
    // checking a msghdr and its iovec array (a fast-path call and its
    // answer are two such packets).
    for (;;) {
      ssize_t sent = ::send(socket_fd, bytes.data(), bytes.size(), flags | MSG_NOSIGNAL);
      if (sent >= 0) return absl::OkStatus();
      if (errno == EINTR) continue;
      return SendFailed("send", errno);
    }
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  for (;;) {
    ssize_t sent = ::sendmsg(socket_fd, &message, flags | MSG_NOSIGNAL);
    if (sent >= 0) return absl::OkStatus();
    if (errno == EINTR) continue;
    return SendFailed("sendmsg", errno);
  }
}

namespace {

// Room for a few descriptors per packet, so that a peer sending too many
// cannot leave any of them open in this process (MSG_CTRUNC would drop them
// unclosed).
constexpr int kMaxFdsPerPacket = 8;
using PacketControl = std::array<char, CMSG_SPACE(kMaxFdsPerPacket * sizeof(int))>;

// The packet `message` received (`received` bytes of `bytes`): its first
// descriptor kept, any others closed. Errors: DATA_LOSS for more than one
// descriptor or a truncated packet, UNAVAILABLE for the end of the stream.
absl::StatusOr<ReceivedPacket> TakePacket(const msghdr& message, std::size_t received,
                                          const char* bytes) {
  ReceivedPacket packet;
  int fd_count = 0;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(const_cast<msghdr*>(&message), header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (fd_count++ == 0) {
        packet.fd.reset(fd);
      } else {
        ::close(fd);
      }
    }
  }
  if (fd_count > 1 || (message.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
    return absl::DataLossError(absl::StrCat(
        "malformed packet on the session socket: ", fd_count,
        " descriptors, flags 0x", absl::Hex(message.msg_flags)));
  }
  if (received == 0 && fd_count == 0) {
    return absl::UnavailableError("the peer closed the session socket");
  }
  packet.bytes.assign(bytes, received);
  return packet;
}

}  // namespace

absl::StatusOr<std::optional<ReceivedPacket>> ReceivePacket(
    int socket_fd, std::size_t max_bytes, int flags) {
  // Read into scratch and copied out at its length: a string of max_bytes
  // would be zeroed whole for every packet.
  constexpr std::size_t kOnStack = 16 * 1024;
  char on_stack[kOnStack];
  std::unique_ptr<char[]> on_heap;
  char* into = on_stack;
  if (max_bytes > kOnStack) {
    on_heap = std::make_unique_for_overwrite<char[]>(max_bytes);
    into = on_heap.get();
  }
  iovec iov{into, max_bytes};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) PacketControl control;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  ssize_t received;
  do {
    received = ::recvmsg(socket_fd, &message, flags | MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) {
    if (errno == EAGAIN) return std::nullopt;
    return ErrnoStatus("recvmsg", errno);
  }
  MEMD_ASSIGN_OR_RETURN(ReceivedPacket packet,
                        TakePacket(message, static_cast<std::size_t>(received), into));
  return std::optional<ReceivedPacket>(std::move(packet));
}

absl::StatusOr<std::vector<absl::StatusOr<ReceivedPacket>>> ReceiveWaitingPackets(
    int socket_fd, std::span<char> scratch, std::size_t max_bytes) {
  constexpr std::size_t kMaxBatch = 64;
  const std::size_t batch = std::min(kMaxBatch, max_bytes == 0 ? 0 : scratch.size() / max_bytes);
  if (batch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no room for one packet of ", max_bytes, " bytes in ", scratch.size()));
  }
  std::array<iovec, kMaxBatch> iovs;
  std::array<mmsghdr, kMaxBatch> messages{};
  std::array<PacketControl, kMaxBatch> controls;
  for (std::size_t i = 0; i < batch; ++i) {
    iovs[i] = iovec{scratch.data() + i * max_bytes, max_bytes};
    msghdr& header = messages[i].msg_hdr;
    header.msg_iov = &iovs[i];
    header.msg_iovlen = 1;
    header.msg_control = controls[i].data();
    header.msg_controllen = controls[i].size();
  }
  int received;
  do {
    received = ::recvmmsg(socket_fd, messages.data(), static_cast<unsigned>(batch),
                          MSG_DONTWAIT | MSG_CMSG_CLOEXEC, nullptr);
  } while (received < 0 && errno == EINTR);
  std::vector<absl::StatusOr<ReceivedPacket>> packets;
  if (received < 0) {
    if (errno == EAGAIN) return packets;
    return ErrnoStatus("recvmmsg", errno);
  }
  packets.reserve(static_cast<std::size_t>(received));
  for (int i = 0; i < received; ++i) {
    packets.push_back(TakePacket(messages[i].msg_hdr, messages[i].msg_len,
                                 scratch.data() + static_cast<std::size_t>(i) * max_bytes));
    // At the end of the stream every further slot reads the end again.
    if (absl::IsUnavailable(packets.back().status())) break;
  }
  return packets;
}

absl::Status RefuseDescriptors(int listener) {
  const int off = 0;
  if (::setsockopt(listener, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off)) == 0) {
    return absl::OkStatus();
  }
  if (errno == ENOPROTOOPT) {
    return absl::UnimplementedError(
        "this kernel cannot refuse descriptors on Unix sockets "
        "(SO_PASSRIGHTS needs Linux 6.16)");
  }
  return ErrnoStatus("setsockopt(SO_PASSRIGHTS)", errno);
}

absl::StatusOr<std::size_t> UnreadBytes(int socket_fd) {
  int bytes = 0;
  if (::ioctl(socket_fd, SIOCOUTQ, &bytes) != 0) {
    return ErrnoStatus("ioctl(SIOCOUTQ)", errno);
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace memd
