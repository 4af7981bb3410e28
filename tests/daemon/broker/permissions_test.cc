#include "daemon/broker/permissions.h"

#include "gtest/gtest.h"

namespace memd::broker {
namespace {

constexpr uid_t kDaemon = 999;

TEST(MayTrimTest, RootAndTheDaemonsUserMayTrim) {
  EXPECT_TRUE(MayTrim(0, kDaemon).ok());
  EXPECT_TRUE(MayTrim(kDaemon, kDaemon).ok());
}

TEST(MayTrimTest, AnyOtherUserIsPermissionDeniedWithBothUids) {
  absl::Status refused = MayTrim(1000, kDaemon);
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_EQ(refused.message(),
            "uid 1000 may not trim: only root and the daemon's user (uid 999) may");
}

TEST(MayTrimTest, ADaemonRunningAsRootLetsOnlyRootTrim) {
  EXPECT_TRUE(MayTrim(0, 0).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(MayTrim(1000, 0)));
}

}  // namespace
}  // namespace memd::broker
