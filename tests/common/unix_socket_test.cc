#include "common/unix_socket.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Two descriptors in one message of one byte: raw sendmsg, as a
// misbehaving peer would.
void SendTwoDescriptors(int socket) {
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
  ASSERT_EQ(::sendmsg(socket, &message, 0), 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

// The lowest free descriptor number: the same before and after a receive
// when no received descriptor leaked.
int LowestFreeDescriptor() {
  const int probe = ::dup(0);
  ::close(probe);
  return probe;
}

TEST(UnixSocketTest, ExtraDescriptorsAreClosedAndReportedAsDataLoss) {
  SocketPair pair = MakePair();
  SendTwoDescriptors(pair.a.get());

  const int lowest = LowestFreeDescriptor();
  EXPECT_EQ(ReceivePacket(pair.b.get(), 64).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(LowestFreeDescriptor(), lowest);
}

// The bytes of each entry, "<CODE>" for an entry that is an error.
std::vector<std::string> Contents(
    const std::vector<absl::StatusOr<ReceivedPacket>>& packets) {
  std::vector<std::string> contents;
  for (const auto& packet : packets) {
    contents.push_back(packet.ok() ? packet->bytes
                                   : absl::StrCat("<", absl::StatusCodeToString(
                                                           packet.status().code()), ">"));
  }
  return contents;
}

TEST(UnixSocketTest, WaitingPacketsComeInOrderWithTheirDescriptorsAtMostAsManyAsFit) {
  SocketPair pair = MakePair();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  for (const char* text : {"one", "two", "three", "four", "five"}) {
    ASSERT_TRUE(SendPacket(pair.a.get(), text,
                           std::string_view(text) == "two" ? write_end.get() : -1)
                    .ok());
  }
  std::vector<char> scratch(3 * 64 + 63);  // Room for 3 of 64 bytes.
  auto first = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Contents(*first), (std::vector<std::string>{"one", "two", "three"}));
  ASSERT_EQ(first->size(), 3u);
  EXPECT_FALSE((*first)[0]->fd.valid());
  ASSERT_TRUE((*first)[1]->fd.valid());
  EXPECT_TRUE(::fcntl((*first)[1]->fd.get(), F_GETFD) & FD_CLOEXEC);
  ASSERT_EQ(::write((*first)[1]->fd.get(), "x", 1), 1);
  char got = 0;
  ASSERT_EQ(::read(read_end.get(), &got, 1), 1);
  EXPECT_EQ(got, 'x');

  auto rest = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(Contents(*rest), (std::vector<std::string>{"four", "five"}));
  // Nothing waits: nothing, at once.
  auto none = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST(UnixSocketTest, AMalformedWaitingPacketIsItsOwnDataLossAndTheNextStillComes) {
  SocketPair pair = MakePair();
  SendTwoDescriptors(pair.a.get());
  ASSERT_TRUE(SendPacket(pair.a.get(), std::string(100, 'l'), -1).ok());  // Over 64.
  ASSERT_TRUE(SendPacket(pair.a.get(), "after", -1).ok());
  const int lowest = LowestFreeDescriptor();
  std::vector<char> scratch(8 * 64);
  auto packets = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  ASSERT_TRUE(packets.ok()) << packets.status();
  EXPECT_EQ(Contents(*packets),
            (std::vector<std::string>{"<DATA_LOSS>", "<DATA_LOSS>", "after"}));
  EXPECT_EQ(LowestFreeDescriptor(), lowest);
}

TEST(UnixSocketTest, TheEndOfTheStreamIsTheLastWaitingEntry) {
  SocketPair pair = MakePair();
  ASSERT_TRUE(SendPacket(pair.a.get(), "last", -1).ok());
  pair.a.reset();
  std::vector<char> scratch(8 * 64);
  auto packets = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  ASSERT_TRUE(packets.ok()) << packets.status();
  EXPECT_EQ(Contents(*packets), (std::vector<std::string>{"last", "<UNAVAILABLE>"}));
}

TEST(UnixSocketTest, WaitingPacketsNeedRoomForOne) {
  SocketPair pair = MakePair();
  std::vector<char> scratch(63);
  auto packets = ReceiveWaitingPackets(pair.b.get(), scratch, 64);
  EXPECT_EQ(packets.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(packets.status().message().find("64"), std::string::npos);
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
