// Finding 5 (issue 22): a reader of a sealed 0644 Level Zero buffer
// receives an O_RDWR IPC descriptor, maps it writable and overwrites the
// data; zeMemOpenIpcHandle, which libmemd calls for every lease, gives
// read-write memory too (on real hardware as well: Level Zero has no
// read-only export or open). memd cannot prevent it, so docs/security.md
// says so under "What memd cannot prevent"; these tests pin down exactly
// what such a reader can do, so that the document cannot drift from it.
//
// A real memd on the project's fake Level Zero driver under the real loader,
// in a child process; the users are separate processes of their own uids.

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/daemon_process.h"
#include "tests/support/hostile.h"
#include "tests/support/run_program.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::ChildResult;
using test::kAlice;
using test::kBob;
using test::kMallory;

constexpr char kSize[] = "3000000";

class ZeReadLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every process here inherits it: the loader of each loads the fake.
    ::setenv("ZE_ENABLE_ALT_DRIVERS", MEMD_FAKE_ZE_PATH, 1);
    auto daemon = test::DaemonProcess::StartAs(
        {.uid = 0}, {"--backend", "level_zero", "--socket-mode", "0666"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    test::LetOthersTraverse(daemon_->socket_dir());
    ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
    // Alice publishes a sealed buffer on the GPU that everyone may read.
    ChildResult published =
        ZeClientAs(kAlice, {"produce", "weights", kSize, "7", "device:0", "mode=0644"});
    ASSERT_EQ(published.exit_code, 0) << published.out;
  }
  void TearDown() override {
    ::unsetenv("MEMD_SOCKET_DIR");
    ::unsetenv("ZE_ENABLE_ALT_DRIVERS");
  }

  // memd-ze-test-client ARGS... as `uid`: its output and exit code.
  static ChildResult ZeClientAs(uid_t uid, std::vector<std::string> args) {
    return ProgramAs(uid, "memd-ze-test-client", std::move(args));
  }
  // build/bin/PROGRAM ARGS... as `uid`, stdout and stderr together.
  static ChildResult ProgramAs(uid_t uid, const std::string& program,
                               std::vector<std::string> args) {
    args.insert(args.begin(), test::BinDir() + "/" + program);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    return test::ForkAs(
        uid, uid,
        [&](int out) {
          ::dup2(out, STDOUT_FILENO);
          ::dup2(out, STDERR_FILENO);
          ::execv(argv[0], argv.data());
          return 127;
        },
        absl::Seconds(60));
  }

  std::unique_ptr<test::DaemonProcess> daemon_;
};

TEST_F(ZeReadLeaseTest, AReaderGetsAReadWriteDescriptorAndItsWritesReachTheNextReader) {
  // Mallory opens read-only with raw calls, as any client may, and writes
  // through the descriptor memd sends every reader.
  ChildResult attack =
      ProgramAs(kMallory, "memd-hostile", {"write_through_ze_read_lease", "weights", "13"});
  EXPECT_EQ(attack.exit_code, 0) << attack.out;
  EXPECT_THAT(attack.out, HasSubstr("handle LEVEL_ZERO_IPC\n"));
  EXPECT_THAT(attack.out, HasSubstr("descriptor O_RDWR\n"));
  EXPECT_THAT(attack.out, HasSubstr("mmap PROT_WRITE: mapped\n"));
  EXPECT_THAT(attack.out, HasSubstr(std::string("wrote ") + kSize + " bytes\n"));
  // Bob, the next reader, reads Mallory's bytes, not Alice's.
  ChildResult bob = ZeClientAs(kBob, {"consume", "weights", kSize, "13"});
  EXPECT_EQ(bob.exit_code, 0) << bob.out;
}

TEST_F(ZeReadLeaseTest, LibmemdOpensAReadLeaseWritableOnTheGpu) {
  // Mallory through libmemd: her lease is read-only (Buffer::writable() is
  // false), the device pointer zeMemOpenIpcHandle gave is not.
  ChildResult mallory = ZeClientAs(kMallory, {"overwrite", "weights", "21"});
  EXPECT_EQ(mallory.exit_code, 0) << mallory.out;
  EXPECT_THAT(mallory.out, HasSubstr(std::string("wrote ") + kSize +
                                     " bytes through a read lease\n"));
  ChildResult bob = ZeClientAs(kBob, {"consume", "weights", kSize, "21"});
  EXPECT_EQ(bob.exit_code, 0) << bob.out;
}

}  // namespace
}  // namespace memd
