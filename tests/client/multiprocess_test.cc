// Real client processes against a real daemon process: what one process
// writes another reads, a killed client loses its leases, and the daemon
// refuses one user another user's buffer.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::BinDir;
using test::DaemonProcess;
using test::PollUntil;
using test::ProgramResult;
using test::RunProgram;

class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }

  void StartDaemon(std::vector<std::string> args) {
    auto daemon = DaemonProcess::Start(std::move(args));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  ProgramResult Run(std::vector<std::string> args) {
    return RunProgram(BinDir() + "/memd-test-client", args, "",
                      {{"MEMD_SOCKET_DIR", daemon_->socket_dir()}});
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(MultiProcessTest, ConsumerProcessReadsWhatAProducerProcessSealed) {
  ProgramResult produced = Run({"produce", "frames/0", "5000000", "42"});
  ASSERT_EQ(produced.exit_code, 0) << produced.err;
  // The producer exited; the persistent buffer lives on without leases.
  auto info = client_->Stat("frames/0");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->lease_count, 0u);
  EXPECT_EQ(info->state, BufferState::kSealed);

  ProgramResult consumed = Run({"consume", "frames/0", "5000000", "42"});
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
  EXPECT_EQ(consumed.out, "OK\n");
  // A different seed is a different pattern: the check can fail.
  ProgramResult wrong = Run({"consume", "frames/0", "5000000", "43"});
  EXPECT_EQ(wrong.exit_code, 4);
}

TEST_F(MultiProcessTest, ConsumerStartedFirstWaitsForTheProducer) {
  // Start the consumer, then the producer; the consumer waits for the seal.
  ASSERT_EQ(client_->Stats()->waits, 0u);
  pid_t consumer = ::fork();
  ASSERT_GE(consumer, 0);
  if (consumer == 0) {
    ProgramResult result = Run({"consume", "late", "100000", "7", "30000"});
    ::_exit(result.exit_code);
  }
  // The daemon counts the consumer's open as waiting before the buffer
  // exists: only then does the producer start.
  ASSERT_TRUE(PollUntil([&] { return client_->Stats()->waits == 1; }))
      << "the consumer's open never waited";
  EXPECT_EQ(client_->Stat("late").status().code(), absl::StatusCode::kNotFound);
  ProgramResult produced = Run({"produce", "late", "100000", "7"});
  ASSERT_EQ(produced.exit_code, 0) << produced.err;
  // The seal woke it: it got the producer's bytes (exit 0 checks them).
  int status = 0;
  ASSERT_EQ(::waitpid(consumer, &status, 0), consumer);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(client_->Stats()->waits, 0u);
}

TEST_F(MultiProcessTest, KilledClientLosesItsLeases) {
  ASSERT_EQ(Run({"produce", "a", "4096", "1"}).exit_code, 0);
  ASSERT_EQ(Run({"produce", "b", "4096", "2"}).exit_code, 0);

  // A holder process that opens both and creates one ephemeral buffer,
  // reporting on a pipe when it holds them.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::dup2(ready[1], 1);
    ::close(ready[0]);
    ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
    std::string bin = BinDir() + "/memd-test-client";
    ::execl(bin.c_str(), bin.c_str(), "hold", "a", "b", nullptr);
    ::_exit(127);
  }
  ::close(ready[1]);
  // Within a minute, or the failure shows where the child hangs.
  absl::StatusOr<std::string> said = test::ReadFromChild(ready[0], holder);
  ::close(ready[0]);
  ASSERT_TRUE(said.ok()) << said.status();
  ASSERT_EQ(*said, "held\n");
  EXPECT_EQ(client_->Stats()->leases, 3u);
  EXPECT_EQ(client_->Stat("a")->lease_count, 1u);
  EXPECT_TRUE(client_->Stat("a.mine").ok());

  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  ASSERT_EQ(::waitpid(holder, nullptr, 0), holder);
  // The daemon sees the hang-up on its own thread.
  EXPECT_TRUE(PollUntil([&] { return client_->Stats()->leases == 0; }));
  EXPECT_EQ(client_->Stat("a")->lease_count, 0u);
  // Its ephemeral buffer went with it; the persistent ones stay.
  EXPECT_EQ(client_->Stat("a.mine").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Stats()->buffers, 2u);
  EXPECT_EQ(client_->Stats()->sessions, 1u);
}

class CrossUserTest : public MultiProcessTest {
 protected:
  static constexpr const char* kNobody = "65534";

  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to run a client as another uid";
    }
    // Let another user reach the sockets: the socket mode, and a path
    // every component of which it may traverse.
    StartDaemon({"--socket-mode", "0666"});
    std::string dir = daemon_->socket_dir();
    for (std::string path = dir; path.size() > 1;
         path = path.substr(0, path.rfind('/'))) {
      struct stat info;
      if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 0005) != 0005) {
        ::chmod(path.c_str(), info.st_mode | 0005);
      }
    }
  }
};

TEST_F(CrossUserTest, OwnerOnlyBufferIsRefusedToAnotherUid) {
  ASSERT_EQ(Run({"produce", "private", "4096", "1"}).exit_code, 0);
  ProgramResult refused = Run({"--uid", kNobody, "open", "private"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_EQ(refused.out, "PERMISSION_DENIED\n") << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("uid 65534 may not read buffer 'private'"));
}

TEST_F(CrossUserTest, BufferWithOtherReadBitIsReadableByAnotherUid) {
  ASSERT_EQ(Run({"produce", "public", "65536", "5", "644"}).exit_code, 0);
  ProgramResult read = Run({"--uid", kNobody, "consume", "public", "65536", "5"});
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
}

TEST_F(CrossUserTest, AnotherUidCannotUnlinkTheOwnersBuffer) {
  ASSERT_EQ(Run({"produce", "public", "4096", "1", "644"}).exit_code, 0);
  ProgramResult refused = Run({"--uid", kNobody, "unlink", "public"});
  EXPECT_EQ(refused.out, "PERMISSION_DENIED\n") << refused.err;
  EXPECT_TRUE(client_->Stat("public").ok());
}

TEST_F(CrossUserTest, OnlyRootOrTheDaemonsUserMayTrim) {
  ProgramResult refused = Run({"--uid", kNobody, "trim", "all"});
  EXPECT_EQ(refused.out, "PERMISSION_DENIED\n") << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("uid 65534 may not trim"));
  EXPECT_EQ(Run({"trim", "all"}).out, "OK\n");
}

TEST_F(CrossUserTest, BuffersBelongToTheUidThatCreatedThem) {
  ProgramResult own = Run({"--uid", kNobody, "produce", "nobodys", "4096", "9"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  auto info = client_->Stat("nobodys");  // Root may inspect anything.
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->owner_uid, 65534u);
  EXPECT_EQ(info->owner_gid, 65534u);
  ProgramResult unlinked = Run({"--uid", kNobody, "unlink", "nobodys"});
  EXPECT_EQ(unlinked.out, "OK\n") << unlinked.err;
}

}  // namespace
}  // namespace memd
