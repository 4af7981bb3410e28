#include "client/src/daemon_trust.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::internal {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kAlice = 61001;
constexpr uid_t kMemd = 998;
constexpr uid_t kMallory = 61003;
const DaemonTrust kAliceTrust{kAlice, std::nullopt};

// S_IFDIR | mode.
mode_t Dir(mode_t mode) { return S_IFDIR | mode; }

// The directories of /run/memd and /tmp as a systemd host has them.
std::vector<DirFacts> RunMemd() {
  return {{"/run/memd", kMemd, Dir(0750)}, {"/run", 0, Dir(0755)}, {"/", 0, Dir(0755)}};
}
std::vector<DirFacts> InTmp(uid_t owner, mode_t mode) {
  return {{"/tmp/memd-61001", owner, Dir(mode)},
          {"/tmp", 0, Dir(01777)},
          {"/", 0, Dir(0755)}};
}

TEST(DaemonTrustTest, ADirectoryRootMadeForTheDaemonsUserIsTrusted) {
  auto owner = CheckSocketDirChain(RunMemd(), kAliceTrust);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_EQ(*owner, kMemd);
  EXPECT_TRUE(CheckDaemonPeer("/run/memd", kMemd, kMemd, kAliceTrust).ok());
  EXPECT_TRUE(CheckDaemonPeer("/run/memd", kMemd, 0, kAliceTrust).ok());
}

TEST(DaemonTrustTest, ItsOwnDirectoryInTmpIsTrusted) {
  EXPECT_TRUE(CheckSocketDirChain(InTmp(kAlice, 0700), kAliceTrust).ok());
  EXPECT_TRUE(CheckSocketDirChain(InTmp(0, 0755), kAliceTrust).ok());
}

TEST(DaemonTrustTest, AnotherUsersDirectoryInTmpIsRefusedUnlessNamed) {
  auto refused = CheckSocketDirChain(InTmp(kMallory, 0755), kAliceTrust);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("/tmp/memd-61001 belongs to uid 61003 (mode 0755)"));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("set MEMD_DAEMON_UID=61003"));
  // The user said whom memd runs as.
  EXPECT_TRUE(
      CheckSocketDirChain(InTmp(kMallory, 0755), DaemonTrust{kAlice, kMallory}).ok());
}

TEST(DaemonTrustTest, DirectoriesOthersMayWriteAreRefused) {
  for (mode_t mode : {0777, 0775, 0757, 01777}) {
    auto refused = CheckSocketDirChain(InTmp(kAlice, mode), kAliceTrust);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << mode;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("chmod go-w"));
  }
  // Not even a daemon uid the user named makes it safe.
  EXPECT_FALSE(CheckSocketDirChain(InTmp(kMemd, 0777), DaemonTrust{kAlice, kMemd}).ok());
}

TEST(DaemonTrustTest, ADirectoryAboveThatSomeoneElseControlsIsRefused) {
  // Mallory owns a directory above: she can swap the socket directory.
  std::vector<DirFacts> chain = {{"/srv/x/memd", 0, Dir(0755)},
                                 {"/srv/x", kMallory, Dir(0755)},
                                 {"/srv", 0, Dir(0755)},
                                 {"/", 0, Dir(0755)}};
  auto refused = CheckSocketDirChain(chain, kAliceTrust);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("/srv/x, above the socket directory /srv/x/memd, belongs to uid 61003"));
  // A directory above that anyone may write (and not sticky) is as bad.
  chain[1] = {"/srv/x", 0, Dir(0777)};
  refused = CheckSocketDirChain(chain, kAliceTrust);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("not sticky"));
}

TEST(DaemonTrustTest, APeerNobodyVouchedForIsRefused) {
  absl::Status refused = CheckDaemonPeer("/run/memd", kMemd, kMallory, kAliceTrust);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("runs as uid 61003"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("uid 998, the socket directory's owner"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("MEMD_DAEMON_UID=61003"));
  EXPECT_TRUE(CheckDaemonPeer("/run/memd", kMemd, kMallory, DaemonTrust{kAlice, kMallory}).ok());
  EXPECT_TRUE(CheckDaemonPeer("/run/memd", kMemd, kAlice, kAliceTrust).ok());
}

TEST(DaemonTrustTest, TheChainOfARealDirectoryEndsAtTheRoot) {
  char path[] = "/tmp/memd-trust-XXXXXX";
  ASSERT_NE(::mkdtemp(path), nullptr);
  int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto chain = DescribeDirChain(fd, path);
  ::close(fd);
  ::rmdir(path);
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->size(), 3u);
  EXPECT_EQ((*chain)[0].path, path);
  EXPECT_EQ((*chain)[0].owner, ::geteuid());
  EXPECT_EQ((*chain)[0].mode & 07777, 0700u);
  EXPECT_EQ((*chain)[1].path, "/tmp");
  EXPECT_EQ((*chain)[2].path, "/");
}

TEST(DaemonTrustTest, DaemonUidComesFromTheEnvironment) {
  ::setenv("MEMD_DAEMON_UID", "998", 1);
  auto uid = DaemonUidFromEnvironment();
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, std::optional<uid_t>(998));
  ::setenv("MEMD_DAEMON_UID", "memd", 1);
  EXPECT_EQ(DaemonUidFromEnvironment().status().code(),
            absl::StatusCode::kInvalidArgument);
  ::unsetenv("MEMD_DAEMON_UID");
  EXPECT_EQ(*DaemonUidFromEnvironment(), std::nullopt);
}

}  // namespace
}  // namespace memd::internal
