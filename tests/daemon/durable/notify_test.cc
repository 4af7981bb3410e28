// Messages to the service manager (daemon/durable/notify.h): sent as
// sd_notify sends them, and never waited on without end.

#include "daemon/durable/notify.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace memd::durable {
namespace {

using ::testing::HasSubstr;

// A datagram socket at `address` ("/path" or "@abstract") that nobody reads
// until the test does, with NOTIFY_SOCKET naming it.
class Manager {
 public:
  explicit Manager(const std::string& address) {
    socket_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un where{};
    where.sun_family = AF_UNIX;
    std::memcpy(where.sun_path, address.data(), address.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + address.size();
    if (address[0] == '@') {
      where.sun_path[0] = '\0';
    } else {
      ++length;
    }
    EXPECT_EQ(::bind(socket_.get(), reinterpret_cast<sockaddr*>(&where), length), 0)
        << std::strerror(errno);
    ::setenv("NOTIFY_SOCKET", address.c_str(), 1);
  }
  ~Manager() { ::unsetenv("NOTIFY_SOCKET"); }

  // The next message and how many descriptors came with it (closed here).
  std::pair<std::string, int> Receive() {
    char text[256];
    iovec data{text, sizeof(text)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr header{};
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    const ssize_t got = ::recvmsg(socket_.get(), &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0) return {"", 0};
    int fds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_type != SCM_RIGHTS) continue;
      fds = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < fds; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        ::close(fd);
      }
    }
    return {std::string(text, got), fds};
  }

 private:
  UniqueFd socket_;
};

TEST(NotifyTest, MessagesAndDescriptorsReachAPathOrAnAbstractSocket) {
  test::TempDir dir;
  for (const std::string& address :
       {dir.Join("notify"), absl::StrCat("@memd-notify-test-", ::getpid())}) {
    Manager manager(address);
    ASSERT_TRUE(NotifyServiceManager("READY=1\nSTATUS=x").ok()) << address;
    UniqueFd a(::memfd_create("a", MFD_CLOEXEC)), b(::memfd_create("b", MFD_CLOEXEC));
    const int fds[] = {a.get(), b.get()};
    ASSERT_TRUE(NotifyServiceManager("FDSTORE=1\nFDNAME=two", fds).ok()) << address;
    EXPECT_EQ(manager.Receive(), std::make_pair(std::string("READY=1\nSTATUS=x"), 0));
    EXPECT_EQ(manager.Receive(), std::make_pair(std::string("FDSTORE=1\nFDNAME=two"), 2));
  }
}

TEST(NotifyTest, AManagerThatReadsNoMoreCostsABoundedWaitNotAStall) {
  test::TempDir dir;
  Manager manager(dir.Join("notify"));
  // The kernel queues net.unix.max_dgram_qlen datagrams (10 by default,
  // 512 under systemd); libsystemd's sd_notify would then wait forever.
  absl::Status sent;
  int messages = 0;
  for (; messages < 4096 && sent.ok(); ++messages) {
    sent = NotifyServiceManager("STATUS=spam", {}, absl::Milliseconds(20));
  }
  EXPECT_EQ(sent.code(), absl::StatusCode::kDeadlineExceeded) << sent;
  EXPECT_THAT(sent.message(), HasSubstr("queue is full"));
  EXPECT_LT(messages, 4096);
  // Read one: room again.
  EXPECT_EQ(manager.Receive().first, "STATUS=spam");
  EXPECT_TRUE(NotifyServiceManager("STATUS=again", {}, absl::Milliseconds(20)).ok());
}

TEST(NotifyTest, WithoutAManagerNothingIsSentAndTheCallerIsTold) {
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), absl::StatusCode::kFailedPrecondition);
  ::setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), absl::StatusCode::kNotFound);
  ::setenv("NOTIFY_SOCKET", absl::StrCat("/", std::string(200, 'x')).c_str(), 1);
  EXPECT_EQ(NotifyServiceManager("READY=1").code(), absl::StatusCode::kInvalidArgument);
  ::unsetenv("NOTIFY_SOCKET");
  const std::vector<int> too_many(254, 0);
  ::setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
  EXPECT_EQ(NotifyServiceManager("FDSTORE=1", too_many).code(),
            absl::StatusCode::kInvalidArgument);
  ::unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace memd::durable
