// Finding 12 (issue 9): the session token was a bare bearer secret: a
// process of another uid that learned it could act as the session. Each
// control connection is now bound to the credentials memd read when it
// accepted it, and a token counts only on a connection of its session's uid.

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
#include "tests/support/hostile.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class TokenBindingTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override {
    StartDaemon();
  }
};

TEST_F(TokenBindingTest, AnotherUsersTokenIsRefusedOnTheAttackersConnection) {
  // A buffer only its owner (root here) may read.
  auto client = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(client.ok()) << client.status();
  auto secret = (*client)->Create("secret", 4096, {.mode = 0600});
  ASSERT_TRUE(secret.ok()) << secret.status();
  ASSERT_TRUE(secret->Seal().ok());
  test::RawSession victim = test::RawSession::Open(config_.socket_dir);

  test::ProgramResult stolen = test::RunHostile(
      test::kMallory, config_.socket_dir, {"call_with_token", victim.token, "secret"});
  ASSERT_EQ(stolen.exit_code, 0) << test::Describe(stolen);
  EXPECT_THAT(stolen.out, StartsWith(absl::StrCat(
                              static_cast<int>(grpc::StatusCode::UNAUTHENTICATED), " ")));
  EXPECT_THAT(stolen.out, HasSubstr("a token is good only for its own user"));

  // The token still works for its owner.
  v1::StatRequest request;
  request.set_name("secret");
  v1::BufferInfo info;
  EXPECT_TRUE(victim.Call(&v1::Memd::Stub::Stat, request, &info).ok());
}

TEST_F(TokenBindingTest, AUsersOwnTokenWorksOnAnyOfItsConnections) {
  // memd-hostile makes its own connection: as the token's uid it is served.
  test::ProgramResult own = test::RunHostile(
      0, config_.socket_dir, {"call_with_token", test::RawSession::Open(config_.socket_dir).token,
                        "missing"});
  ASSERT_EQ(own.exit_code, 0) << test::Describe(own);
  EXPECT_THAT(own.out,
              StartsWith(absl::StrCat(static_cast<int>(grpc::StatusCode::NOT_FOUND), " ")));
}

}  // namespace
}  // namespace memd
