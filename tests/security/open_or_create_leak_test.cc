// Finding 10 (issue 9): OpenOrCreate of a name the caller may not read
// answered FAILED_PRECONDITION "exists with size N at LOCATION" before it
// checked permission, so anyone could learn the size and location of any
// buffer (and, by trying sizes, confirm them). Permission comes first now:
// the answer is PERMISSION_DENIED, the same whatever size was asked.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::kAlice;
using ::memd::test::kMallory;
using ::memd::test::ProgramResult;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class OpenOrCreateLeakTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override { StartDaemon(); }
};

TEST_F(OpenOrCreateLeakTest, AnUnreadableBufferTellsNeitherItsSizeNorItsLocation) {
  const std::string secret(12345, 's');
  ProgramResult published = Hostile(kAlice, {"publish_text", "alice/secret", secret, "600"});
  ASSERT_EQ(published.out, "published\n") << Describe(published);

  ProgramResult wrong_size = Hostile(kMallory, {"open_or_create_text", "alice/secret", "1"});
  EXPECT_EQ(wrong_size.exit_code, 1) << Describe(wrong_size);
  EXPECT_THAT(wrong_size.out, StartsWith("PERMISSION_DENIED: uid 61003 may not read "
                                         "buffer 'alice/secret'"));
  EXPECT_THAT(wrong_size.out, Not(HasSubstr("12345")));
  EXPECT_THAT(wrong_size.out, Not(HasSubstr("size")));
  EXPECT_THAT(wrong_size.out, Not(HasSubstr("host")));
  // Guessing right changes nothing either.
  ProgramResult right_size =
      Hostile(kMallory, {"open_or_create_text", "alice/secret", "12345"});
  EXPECT_EQ(right_size.out, wrong_size.out) << Describe(right_size);
}

}  // namespace
}  // namespace memd
