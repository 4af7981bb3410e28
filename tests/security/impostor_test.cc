// Finding 8 (issue 9), the client's side: a client talked to whatever
// listened in its socket directory. Another user who made that directory
// (or a link in it) heard the client's session token, buffer names and
// bytes.

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "common/session_codec.h"
#include "common/unix_socket.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/hostile.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::Describe;
using test::kAlice;
using test::kMallory;

// What an impostor heard.
struct Heard {
  int sessions = -1;  // Connections to its session socket.
  int controls = -1;  // Connections to its control (gRPC) socket.
  long bytes = -1;    // Bytes received on any of them.
};

/// A daemon impostor run as kMallory: listens (mode 0666) on session.sock
/// and/or memd.sock in a directory, greets each session as memd would (so a
/// client that believes it goes on to make calls), and counts what arrives
/// until stopped. No gRPC in it: it only listens and counts.
class Impostor {
 public:
  Impostor(std::string dir, bool session, bool control)
      : dir_(std::move(dir)), session_(session), control_(control) {}
  ~Impostor() { (void)Stop(); }

  // Starts it and waits until it listens; false when it could not.
  bool Start() {
    if (::pipe2(ready_, O_CLOEXEC) != 0 || ::pipe2(stop_, O_CLOEXEC) != 0) return false;
    SessionHello greeting;
    greeting.protocol_version = kSessionProtocolVersion;
    greeting.session_id = 1;
    greeting.token = std::string(32, 'f');
    const std::string hello = EncodeSessionMessage(greeting);
    thread_ = std::thread([this, hello] {
      result_ = test::ForkAs(kMallory, kMallory,
                                [&](int out) { return Serve(hello, out); });
    });
    pollfd ready{ready_[0], POLLIN, 0};
    char byte = 0;
    return ::poll(&ready, 1, 10000) == 1 && ::read(ready_[0], &byte, 1) == 1 &&
           byte == '1';
  }

  // Stops it and tells what it heard.
  Heard Stop() {
    if (!thread_.joinable()) return heard_;
    ::write(stop_[1], "x", 1);
    thread_.join();
    for (int fd : {ready_[0], ready_[1], stop_[0], stop_[1]}) ::close(fd);
    std::sscanf(result_.out.c_str(), "sessions %d controls %d bytes %ld",
                &heard_.sessions, &heard_.controls, &heard_.bytes);
    return heard_;
  }

 private:
  // The child's body.
  int Serve(const std::string& hello, int out) {
    std::vector<UniqueFd> listeners;
    std::vector<bool> is_session;
    auto listen = [&](const std::string& path, int type, bool session) {
      auto fd = ListenUnix(path, type, 0666);
      if (!fd.ok()) return false;
      listeners.push_back(std::move(*fd));
      is_session.push_back(session);
      return true;
    };
    if ((session_ && !listen(SessionSocketPath(dir_), SOCK_SEQPACKET, true)) ||
        (control_ && !listen(ControlSocketPath(dir_), SOCK_STREAM, false))) {
      ::write(ready_[1], "0", 1);
      return 1;
    }
    ::write(ready_[1], "1", 1);
    int sessions = 0, controls = 0;
    long bytes = 0;
    std::vector<UniqueFd> connections;
    for (;;) {
      std::vector<pollfd> fds = {{stop_[0], POLLIN, 0}};
      for (const UniqueFd& fd : listeners) fds.push_back({fd.get(), POLLIN, 0});
      for (const UniqueFd& fd : connections) fds.push_back({fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) break;
      for (std::size_t i = 0; i < listeners.size(); ++i) {
        if (fds[1 + i].revents == 0) continue;
        UniqueFd connection(::accept4(listeners[i].get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!connection) continue;
        if (is_session[i]) {
          ++sessions;
          (void)SendPacket(connection.get(), hello, -1, MSG_DONTWAIT);
        } else {
          ++controls;
        }
        connections.push_back(std::move(connection));
      }
      const std::size_t first = 1 + listeners.size();
      for (std::size_t i = connections.size(); i-- > 0;) {
        if (i + first >= fds.size() || fds[first + i].revents == 0) continue;
        char chunk[65536];
        ssize_t got = ::recv(connections[i].get(), chunk, sizeof(chunk), MSG_DONTWAIT);
        if (got > 0) {
          bytes += got;
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          connections.erase(connections.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
    }
    test::WriteAll(out, absl::StrCat("sessions ", sessions, " controls ", controls,
                                        " bytes ", bytes, "\n"));
    return 0;
  }

  const std::string dir_;
  const bool session_;
  const bool control_;
  int ready_[2] = {-1, -1};
  int stop_[2] = {-1, -1};
  std::thread thread_;
  test::ChildResult result_;
  Heard heard_;
};

class ImpostorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = dir_.Join("shared");  // Like /tmp.
    ASSERT_TRUE(test::MakeStickyDir(shared_));
  }

  // Alice publishes a secret through libmemd, as any client would.
  test::ProgramResult AlicePublishes(const std::string& socket_dir) {
    return test::RunHostile(kAlice, socket_dir,
                               {"publish_text", "secret", "alice's secret", "600"}, "",
                               absl::Seconds(10));
  }

  // Makes `dir` as kMallory (mode 0755).
  void MalloryMakes(const std::string& dir) {
    test::ChildResult made = test::ForkAs(kMallory, kMallory, [&](int) {
      return ::mkdir(dir.c_str(), 0755) == 0 ? 0 : 1;
    });
    ASSERT_EQ(made.exit_code, 0);
  }

  test::TempDir dir_;
  std::string shared_;
};

TEST_F(ImpostorTest, ClientRefusesADirectoryAnotherUserMade) {
  // Where Alice's client looks by default when she has no runtime dir.
  const std::string trap = shared_ + "/memd-61001";
  MalloryMakes(trap);
  Impostor impostor(trap, /*session=*/true, /*control=*/true);
  ASSERT_TRUE(impostor.Start());

  test::ProgramResult alice = AlicePublishes(trap);
  EXPECT_EQ(alice.exit_code, 1) << Describe(alice);
  EXPECT_THAT(alice.out, HasSubstr("PERMISSION_DENIED")) << alice.out;
  EXPECT_THAT(alice.out, HasSubstr("uid 61003")) << alice.out;
  EXPECT_THAT(alice.out, HasSubstr("MEMD_DAEMON_UID")) << alice.out;

  Heard heard = impostor.Stop();
  EXPECT_EQ(heard.sessions, 0);
  EXPECT_EQ(heard.controls, 0);
  EXPECT_EQ(heard.bytes, 0);
}

TEST_F(ImpostorTest, ClientRefusesASessionSocketAnotherUserListensOn) {
  // A directory only root may write, holding a socket another user listens
  // on (root let it in for a while): the directory is fine, the peer not.
  const std::string lent = dir_.Join("lent");
  ASSERT_EQ(::mkdir(lent.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(lent.c_str(), 0777), 0);
  Impostor impostor(lent, /*session=*/true, /*control=*/true);
  ASSERT_TRUE(impostor.Start());
  ASSERT_EQ(::chmod(lent.c_str(), 0755), 0);

  test::ProgramResult alice = AlicePublishes(lent);
  EXPECT_EQ(alice.exit_code, 1) << Describe(alice);
  EXPECT_THAT(alice.out, HasSubstr("PERMISSION_DENIED")) << alice.out;
  EXPECT_THAT(alice.out, HasSubstr("runs as uid 61003")) << alice.out;

  Heard heard = impostor.Stop();
  EXPECT_EQ(heard.controls, 0);
  EXPECT_EQ(heard.bytes, 0);
}

TEST_F(ImpostorTest, ClientRefusesALinkToTheRealDaemonInAnotherUsersDirectory) {
  // The real daemon answers the session (its peer is root), but the gRPC
  // calls, with the session's token, would go to the impostor's memd.sock.
  Config config;
  config.socket_dir = dir_.Join("run");
  config.socket_mode = 0666;
  config.metrics_address = "";
  config.backend = "host";
  auto daemon = Daemon::Start(config);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  test::LetOthersTraverse(config.socket_dir);
  const std::string relay = shared_ + "/relay";
  MalloryMakes(relay);
  test::ChildResult linked = test::ForkAs(kMallory, kMallory, [&](int) {
    return ::symlink(SessionSocketPath(config.socket_dir).c_str(),
                     SessionSocketPath(relay).c_str()) == 0
               ? 0
               : 1;
  });
  ASSERT_EQ(linked.exit_code, 0);
  Impostor impostor(relay, /*session=*/false, /*control=*/true);
  ASSERT_TRUE(impostor.Start());

  test::ProgramResult alice = AlicePublishes(relay);
  EXPECT_EQ(alice.exit_code, 1) << Describe(alice);
  EXPECT_THAT(alice.out, HasSubstr("PERMISSION_DENIED")) << alice.out;
  EXPECT_THAT(alice.out, HasSubstr("uid 61003")) << alice.out;
  Heard heard = impostor.Stop();
  EXPECT_EQ(heard.controls, 0);
  EXPECT_EQ(heard.bytes, 0);

  // The real directory still serves her.
  test::ProgramResult real = AlicePublishes(config.socket_dir);
  EXPECT_EQ(real.exit_code, 0) << Describe(real);
}

}  // namespace
}  // namespace memd
