// Finding 8 (issue 9), the daemon's side: memd trusted whatever socket
// directory it found. Another user pre-created /tmp/memd-$UID (mode 0777)
// with memd.lock a symbolic link to a victim file, and memd followed the
// link and overwrote the file.

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_format.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/raw_session.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::kMallory;
using test::ReadWholeFile;

constexpr char kPrecious[] = "precious bytes of a file memd may write\n";

class SocketDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shared_ = dir_.Join("shared");  // Like /tmp.
    ASSERT_TRUE(test::MakeStickyDir(shared_));
    victim_ = dir_.Join("victim");
    test::WriteWholeFile(victim_, kPrecious);
    ASSERT_EQ(::chmod(victim_.c_str(), 0644), 0);
  }

  absl::Status StartOn(const std::string& socket_dir) {
    Config config;
    config.socket_dir = socket_dir;
    config.socket_mode = 0666;
    config.metrics_address = "";
    config.backend = "host";
    auto daemon = Daemon::Start(config);
    if (!daemon.ok()) return daemon.status();
    daemon_ = std::move(*daemon);
    return absl::OkStatus();
  }

  test::TempDir dir_;
  std::string shared_;
  std::string victim_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(SocketDirTest, DirectoryAnotherUserMadeIsRefusedAndItsLinksNotFollowed) {
  const std::string trap = shared_ + "/memd-0";
  test::ChildResult made = test::ForkAs(kMallory, kMallory, [&](int) {
    if (::mkdir(trap.c_str(), 0777) != 0 || ::chmod(trap.c_str(), 0777) != 0) return 1;
    return ::symlink(victim_.c_str(), (trap + "/memd.lock").c_str()) == 0 ? 0 : 1;
  });
  ASSERT_EQ(made.exit_code, 0);

  absl::Status started = StartOn(trap);
  EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
  EXPECT_THAT(std::string(started.message()), HasSubstr("belongs to uid 61003 (mode 0777)"));
  EXPECT_THAT(std::string(started.message()), HasSubstr("remove it"));
  EXPECT_EQ(ReadWholeFile(victim_), kPrecious);
}

TEST_F(SocketDirTest, DirectoryOthersMayWriteIsRefused) {
  for (mode_t mode : {0777, 0775, 0757, 01777}) {
    const std::string open = dir_.Join(absl::StrFormat("open-%o", mode));
    ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(open.c_str(), mode), 0);
    // Anyone could have left this here.
    ASSERT_EQ(::symlink(victim_.c_str(), (open + "/memd.lock").c_str()), 0);

    absl::Status started = StartOn(open);
    EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
    EXPECT_THAT(std::string(started.message()), HasSubstr(absl::StrFormat("has mode %04o", mode)));
    EXPECT_THAT(std::string(started.message()), HasSubstr("chmod go-w"));
  }
  EXPECT_EQ(ReadWholeFile(victim_), kPrecious);
}

TEST_F(SocketDirTest, SymbolicLinkAsTheDirectoryIsRefused) {
  const std::string real = dir_.Join("real");
  const std::string link = dir_.Join("link");
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  absl::Status started = StartOn(link);
  EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
  EXPECT_THAT(std::string(started.message()), HasSubstr("symbolic link"));
}

TEST_F(SocketDirTest, LinksInsideTheDirectoryAreNeverFollowed) {
  const std::string run = dir_.Join("run");
  ASSERT_EQ(::mkdir(run.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (run + "/memd.lock").c_str()), 0);
  absl::Status started = StartOn(run);
  EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition) << started;
  EXPECT_THAT(std::string(started.message()), HasSubstr("memd.lock is a symbolic link"));
  EXPECT_EQ(ReadWholeFile(victim_), kPrecious);

  // Links under the sockets' names are removed as stale, not followed: the
  // victim neither changes mode nor goes away.
  ASSERT_EQ(::unlink((run + "/memd.lock").c_str()), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (run + "/session.sock").c_str()), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (run + "/memd.sock").c_str()), 0);
  ASSERT_TRUE(StartOn(run).ok());
  EXPECT_EQ(ReadWholeFile(victim_), kPrecious);
  struct stat victim;
  ASSERT_EQ(::stat(victim_.c_str(), &victim), 0);
  EXPECT_EQ(victim.st_mode & 07777, 0644u);
  struct stat session;
  ASSERT_EQ(::lstat((run + "/session.sock").c_str(), &session), 0);
  EXPECT_TRUE(S_ISSOCK(session.st_mode));
  EXPECT_EQ(session.st_mode & 07777, 0666u);
}

TEST_F(SocketDirTest, DirectoryItMakesServesOtherUsers) {
  const std::string run = dir_.Join("made/run");
  ASSERT_TRUE(StartOn(run).ok());
  struct stat info;
  ASSERT_EQ(::stat(run.c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, ::geteuid());
  EXPECT_EQ(info.st_mode & 022, 0u);
  ASSERT_EQ(::lstat((run + "/session.sock").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0666u);
  EXPECT_TRUE(test::RawSession::Connect(run).ok());
  // And a daemon restarted on it finds it acceptable.
  daemon_.reset();
  EXPECT_TRUE(StartOn(run).ok());
}

}  // namespace
}  // namespace memd
