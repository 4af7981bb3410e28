// Finding 7 (issue 22): memctl's handling of the files named on its command
// line. `memctl get -o PATH` followed a symbolic link another user planted
// at PATH and truncated its target (a file of the caller's); `memctl put`
// of a FIFO nobody writes blocked for ever in open(2), and so did `get -o`
// into a FIFO nobody reads. Now a link at the output is refused unless
// --follow-symlinks, and a FIFO's other end is waited for at most
// --fifo-timeout.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::memd::test::BinDir;
using ::memd::test::DaemonProcess;
using ::memd::test::Describe;
using ::memd::test::ProgramResult;
using ::memd::test::ReadWholeFile;
using ::memd::test::WriteWholeFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr int kExitFailed = 1;

class MemctlFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start();
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    // A directory everyone may write, without the sticky bit (a shared
    // project or spool directory; /tmp with fs.protected_symlinks=0 is
    // no better).
    ASSERT_EQ(::mkdir(shared_.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(shared_.c_str(), 0777), 0);
    test::LetOthersTraverse(shared_);
    ASSERT_EQ(::mkdir(private_.c_str(), 0700), 0);
  }

  // memctl --socket-dir <the daemon's> args..., killed after 30 s should it
  // hang (as it did in open(2) of a FIFO).
  ProgramResult Run(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {"--socket-dir", daemon_->socket_dir()});
    return test::RunProgram(BinDir() + "/memctl", args, input, {}, absl::Seconds(30));
  }

  void Publish(const std::string& name, const std::string& bytes) {
    ProgramResult put = Run({"put", name, "-"}, bytes);
    ASSERT_EQ(put.exit_code, 0) << Describe(put);
  }

  // Runs `plant` as Mallory, who may write the shared directory.
  void AsMallory(const std::function<bool()>& plant) {
    test::ChildResult planted = test::ForkAs(test::kMallory, test::kMallory,
                                             [&](int) { return plant() ? 0 : 1; });
    ASSERT_EQ(planted.exit_code, 0) << "Mallory could not plant it";
  }

  test::TempDir files_;
  const std::string shared_ = files_.Join("shared");
  const std::string private_ = files_.Join("private");
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(MemctlFilesTest, GetRefusesALinkAnotherUserPlantedAtItsOutput) {
  Publish("report", "the buffer's bytes");
  const std::string precious = private_ + "/thesis.tex";
  WriteWholeFile(precious, "years of work");
  const std::string output = shared_ + "/report.out";
  AsMallory([&] { return ::symlink(precious.c_str(), output.c_str()) == 0; });

  ProgramResult get = Run({"get", "report", "-o", output});
  EXPECT_EQ(get.exit_code, kExitFailed) << Describe(get);
  EXPECT_THAT(get.err, AllOf(StartsWith("memctl: write " + output +
                                        ": FAILED_PRECONDITION: " + output +
                                        " is a symbolic link"),
                             HasSubstr("--follow-symlinks")));
  // cp to a file writes as get does.
  ProgramResult cp = Run({"cp", "report", output});
  EXPECT_EQ(cp.exit_code, kExitFailed) << Describe(cp);
  EXPECT_THAT(cp.err, HasSubstr(output + " is a symbolic link"));
  EXPECT_EQ(ReadWholeFile(precious), "years of work");
}

TEST_F(MemctlFilesTest, GetWritesThroughALinkOnlyWhenAskedTo) {
  Publish("report", "the buffer's bytes");
  const std::string target = private_ + "/report.txt";
  const std::string link = private_ + "/latest";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ProgramResult get = Run({"get", "report", "-o", link, "--follow-symlinks"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(ReadWholeFile(target), "the buffer's bytes");
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link itself stays";
}

TEST_F(MemctlFilesTest, PutFromAFifoNobodyWritesGivesUpAtItsTimeout) {
  const std::string fifo = shared_ + "/input";
  AsMallory([&] { return ::mkfifo(fifo.c_str(), 0666) == 0; });
  ProgramResult put = Run({"put", "--fifo-timeout", "0.2", "stalled", fifo});
  EXPECT_EQ(put.exit_code, kExitFailed) << Describe(put);
  EXPECT_THAT(put.err, StartsWith("memctl: read " + fifo +
                                  ": DEADLINE_EXCEEDED: no process opened the FIFO " +
                                  fifo + " for writing within 200ms"));
  auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_THAT(*(*client)->List(), IsEmpty()) << "no buffer is left";
}

TEST_F(MemctlFilesTest, PutFromAFifoReadsWhatItsWriterSends) {
  const std::string fifo = private_ + "/input";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    // Blocks until memctl opens the FIFO for reading.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    test::WriteAll(fd, "sent through a FIFO");
    ::close(fd);
  });
  ProgramResult put = Run({"put", "piped", fifo});
  // Had memctl never opened it, a reader of our own lets the writer go.
  const int unblock = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  writer.join();
  ::close(unblock);
  ASSERT_EQ(put.exit_code, 0) << Describe(put);
  EXPECT_EQ(Run({"get", "piped"}).out, "sent through a FIFO");
}

TEST_F(MemctlFilesTest, GetIntoAFifoNobodyReadsGivesUpAtItsTimeout) {
  Publish("report", "the buffer's bytes");
  const std::string fifo = shared_ + "/report.out";
  AsMallory([&] { return ::mkfifo(fifo.c_str(), 0666) == 0; });
  ProgramResult get = Run({"get", "--fifo-timeout", "0.2", "report", "-o", fifo});
  EXPECT_EQ(get.exit_code, kExitFailed) << Describe(get);
  EXPECT_THAT(get.err, StartsWith("memctl: write " + fifo +
                                  ": DEADLINE_EXCEEDED: no process opened the FIFO " +
                                  fifo + " for reading within 200ms"));
}

}  // namespace
}  // namespace memd
