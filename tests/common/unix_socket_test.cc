#include "common/unix_socket.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

struct SocketPair {
  UniqueFd a, b;
};

SocketPair MakePair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

TEST(UnixSocketTest, PassesADescriptorThatReachesTheSameFile) {
  SocketPair pair = MakePair();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

  ASSERT_TRUE(SendPacket(pair.a.get(), "hello", write_end.get()).ok());
  auto packet = ReceivePacket(pair.b.get(), 64);
  ASSERT_TRUE(packet.ok()) << packet.status();
  ASSERT_TRUE(packet->has_value());
  EXPECT_EQ((*packet)->bytes, "hello");
  ASSERT_TRUE((*packet)->fd.valid());
  EXPECT_NE((*packet)->fd.get(), write_end.get());
  EXPECT_TRUE(::fcntl((*packet)->fd.get(), F_GETFD) & FD_CLOEXEC);

  ASSERT_EQ(::write((*packet)->fd.get(), "x", 1), 1);
  char got = 0;
  ASSERT_EQ(::read(read_end.get(), &got, 1), 1);
  EXPECT_EQ(got, 'x');
}

TEST(UnixSocketTest, NonBlockingReceiveOfNothingIsNullopt) {
  SocketPair pair = MakePair();
  auto packet = ReceivePacket(pair.b.get(), 64, MSG_DONTWAIT);
  ASSERT_TRUE(packet.ok());
  EXPECT_FALSE(packet->has_value());
}

TEST(UnixSocketTest, HangUpIsUnavailable) {
  SocketPair pair = MakePair();
  pair.a.reset();
  EXPECT_EQ(ReceivePacket(pair.b.get(), 64).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(SendPacket(pair.b.get(), "x", -1).code(),
            absl::StatusCode::kUnavailable);
}

TEST(UnixSocketTest, ExtraDescriptorsAreClosedAndReportedAsDataLoss) {
  SocketPair pair = MakePair();
  // Two descriptors in one message: raw sendmsg, as a misbehaving peer would.
  int fds[2] = {::dup(0), ::dup(1)};
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(header), fds, sizeof(fds));
  ASSERT_EQ(::sendmsg(pair.a.get(), &message, 0), 1);
  ::close(fds[0]);
  ::close(fds[1]);

  // The lowest free descriptor number tells whether any received one leaked.
  int probe = ::dup(0);
  ::close(probe);
  EXPECT_EQ(ReceivePacket(pair.b.get(), 64).status().code(),
            absl::StatusCode::kDataLoss);
  int after = ::dup(0);
  ::close(after);
  EXPECT_EQ(after, probe);
}

TEST(UnixSocketTest, ReportsPeerCredentials) {
  SocketPair pair = MakePair();
  auto peer = GetPeerCredentials(pair.a.get());
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->uid, ::geteuid());
  EXPECT_EQ(peer->gid, ::getegid());
}

TEST(UnixSocketTest, ConnectToNothingIsUnavailableAndNamesThePath) {
  test::TempDir dir;
  auto socket = ConnectUnix(dir.Join("none.sock"), SOCK_STREAM);
  EXPECT_EQ(socket.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(socket.status().message().find("none.sock"), std::string::npos);
}

TEST(UnixSocketTest, ListenAppliesTheModeAndRejectsOverlongPaths) {
  test::TempDir dir;
  auto listener = ListenUnix(dir.Join("s.sock"), SOCK_SEQPACKET, 0600);
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat info;
  ASSERT_EQ(::stat(dir.Join("s.sock").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_TRUE(ConnectUnix(dir.Join("s.sock"), SOCK_SEQPACKET).ok());

  EXPECT_EQ(ListenUnix(dir.Join(std::string(200, 'x')), SOCK_STREAM, 0600)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memd
