// Finding 9 (issue 9): anyone could claim a name first. A consumer waiting
// for its producer accepted whatever buffer of that name was sealed first,
// possibly one another user forged. A consumer may now demand the producer:
// an expected owner uid on Open and OpenOrCreate (OpenOptions::owner,
// CreateOptions::existing_owner, `memctl get --owner`); a buffer of any
// other owner is PERMISSION_DENIED, also when it is sealed while the
// consumer waits.

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::kAlice;
using ::memd::test::kBob;
using ::memd::test::kMallory;
using ::memd::test::ProgramResult;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kAliceUid = absl::StrCat(kAlice);

class ProducerOwnerTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override { StartDaemon(); }
};

TEST_F(ProducerOwnerTest, AConsumerThatDemandsItsProducerRefusesAForgery) {
  ProgramResult forged = Hostile(kMallory, {"publish_text", "jobs/result", "forged", "644"});
  ASSERT_EQ(forged.out, "published\n") << Describe(forged);

  // The attack: without a demand, the consumer takes the forger's bytes.
  ProgramResult trusting = Hostile(kBob, {"read_text", "jobs/result", "0"});
  EXPECT_EQ(trusting.out, "read: forged\n") << Describe(trusting);

  const auto denied = AllOf(StartsWith("PERMISSION_DENIED: "), HasSubstr("'jobs/result'"),
                            HasSubstr("owned by uid 61003"),
                            HasSubstr("demanded uid 61001"));
  ProgramResult careful = Hostile(kBob, {"read_text", "jobs/result", "0", kAliceUid});
  EXPECT_EQ(careful.exit_code, 1) << Describe(careful);
  EXPECT_THAT(careful.out, denied);
  ProgramResult either =
      Hostile(kBob, {"open_or_create_text", "jobs/result", "6", kAliceUid});
  EXPECT_EQ(either.exit_code, 1) << Describe(either);
  EXPECT_THAT(either.out, denied);
}

TEST_F(ProducerOwnerTest, AWaitingConsumerIsNotHandedAForgery) {
  // Bob waits for Alice's result; Mallory seals one of that name first.
  // (Whether Bob's open is waiting when the seal comes or arrives after it,
  // the answer is the same; broker_test wakes a waiting one for certain.)
  ProgramResult waited;
  std::thread consumer([&] {
    waited = Hostile(kBob, {"read_text", "jobs/late", "30000", kAliceUid});
  });
  ProgramResult forged = Hostile(kMallory, {"publish_text", "jobs/late", "forged", "644"});
  consumer.join();
  ASSERT_EQ(forged.out, "published\n") << Describe(forged);
  EXPECT_EQ(waited.exit_code, 1) << Describe(waited);
  EXPECT_THAT(waited.out, AllOf(StartsWith("PERMISSION_DENIED: "),
                                HasSubstr("owned by uid 61003")));
}

TEST_F(ProducerOwnerTest, TheDemandedProducersBufferIsAccepted) {
  ProgramResult waited;
  std::thread consumer([&] {
    waited = Hostile(kBob, {"read_text", "jobs/good", "30000", kAliceUid});
  });
  ProgramResult published =
      Hostile(kAlice, {"publish_text", "jobs/good", "genuine", "644"});
  consumer.join();
  ASSERT_EQ(published.out, "published\n") << Describe(published);
  EXPECT_EQ(waited.out, "read: genuine\n") << Describe(waited);
  ProgramResult either =
      Hostile(kBob, {"open_or_create_text", "jobs/good", "7", kAliceUid});
  EXPECT_EQ(either.out, "read: genuine\n") << Describe(either);
}

}  // namespace
}  // namespace memd
