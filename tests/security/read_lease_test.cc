// Finding 1 (issue 9): a memfd's inode was mode 0777, so a client holding the
// read-only descriptor of a sealed buffer reopened /proc/self/fd/N O_RDWR
// and wrote into the whole segment: the buffer and its neighbours.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/hostile.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using test::Describe;
using test::kAlice;
using test::kBob;
using test::kMallory;
using test::RunHostile;

class ReadLeaseTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override { StartDaemon(); }

  void Publish(const std::string& name, const std::string& text) {
    test::ProgramResult made =
        RunHostile(kAlice, config_.socket_dir, {"publish_text", name, text, "644"});
    ASSERT_EQ(made.exit_code, 0) << Describe(made);
  }

  std::string ReadAs(uid_t uid, const std::string& name) {
    test::ProgramResult read =
        RunHostile(uid, config_.socket_dir, {"read_text", name, "0"});
    EXPECT_EQ(read.exit_code, 0) << Describe(read);
    // "read: TEXT\n"
    return read.out.size() > 7 ? read.out.substr(6, read.out.size() - 7) : read.out;
  }
};

TEST_F(ReadLeaseTest, AnotherUidCannotWriteASealedBufferByAnyPath) {
  // Two small buffers of one domain share a segment: the attacker's
  // descriptor reaches both.
  const std::string target = absl::StrCat("target:", std::string(4000, 't'));
  const std::string neighbour = absl::StrCat("neighbour:", std::string(3000, 'n'));
  Publish("victim/target", target);
  Publish("victim/neighbour", neighbour);

  test::ProgramResult attack = RunHostile(
      kMallory, config_.socket_dir, {"write_through_read_lease", "victim/target"});
  EXPECT_EQ(attack.exit_code, 0) << Describe(attack);
  std::vector<std::string> lines =
      absl::StrSplit(attack.out, '\n', absl::SkipEmpty());
  EXPECT_THAT(lines, SizeIs(10)) << attack.out;
  EXPECT_THAT(lines, Each(HasSubstr(": refused: "))) << attack.out;

  // A third user reads what the owner sealed.
  const std::string read_target = ReadAs(kBob, "victim/target");
  EXPECT_TRUE(read_target == target) << "victim/target now starts with "
                                     << read_target.substr(0, 16);
  const std::string read_neighbour = ReadAs(kBob, "victim/neighbour");
  EXPECT_TRUE(read_neighbour == neighbour) << "victim/neighbour now starts with "
                                           << read_neighbour.substr(0, 16);
}

}  // namespace
}  // namespace memd
