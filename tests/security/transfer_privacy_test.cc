// Transfers belong to the session that started them, and copies reach only
// the caller's own leases: another user probing ids learns nothing (every
// answer is NOT_FOUND, as for ids nobody has) and changes nothing.

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/security/open_daemon.h"
#include "tests/support/hostile.h"

namespace memd {
namespace {

using ::testing::Each;
using ::testing::EndsWith;
using ::testing::SizeIs;
using test::Describe;
using test::kMallory;

class TransferPrivacyTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override {
    StartDaemon();
    auto client = Client::Connect({.socket_dir = config_.socket_dir});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::unique_ptr<Client> client_;
};

TEST_F(TransferPrivacyTest, AnotherUserCanNeitherSeeNorCancelATransfer) {
  auto source = client_->Create("victim/src", 1 << 20);
  auto destination = client_->Create("victim/dst", 1 << 20);
  ASSERT_TRUE(source.ok() && destination.ok());
  test::FillPattern(source->mutable_data(), 5);
  std::vector<Transfer> transfers;
  for (int i = 0; i < 3; ++i) {
    auto transfer = client_->Copy({&*source}, {&*destination});
    ASSERT_TRUE(transfer.ok()) << transfer.status();
    ASSERT_TRUE(transfer->Wait().ok());
    transfers.push_back(std::move(*transfer));
  }

  // The victim's ids, and one nobody has: ids are not counters to walk
  // (OpaqueIds), so the attacker is handed the real ones.
  std::vector<std::string> ids = {"123456789"};
  for (const Transfer& transfer : transfers) ids.push_back(std::to_string(transfer.id()));
  ids.insert(ids.begin(), "probe_transfers");
  test::ProgramResult probe = Hostile(kMallory, ids);
  ASSERT_EQ(probe.exit_code, 0) << Describe(probe);
  std::vector<std::string> lines = absl::StrSplit(probe.out, '\n', absl::SkipEmpty());
  EXPECT_THAT(lines, SizeIs(4));
  // 5: NOT_FOUND, the victim's ids as much as ids nobody has.
  EXPECT_THAT(lines, Each(EndsWith(" 5 5 5"))) << probe.out;

  for (Transfer& transfer : transfers) {
    auto progress = transfer.Progress();
    ASSERT_TRUE(progress.ok()) << progress.status();
    EXPECT_EQ(progress->state, TransferState::kDone);
  }
}

TEST_F(TransferPrivacyTest, AnotherUserCannotCopyFromOrIntoSomeoneElsesLeases) {
  auto secret = client_->Create("victim/secret", 4096);
  ASSERT_TRUE(secret.ok());
  test::FillPattern(secret->mutable_data(), 9);

  test::ProgramResult attack = Hostile(
      kMallory, {"copy_leases", "4096", std::to_string(secret->lease_id()), "123456789"});
  ASSERT_EQ(attack.exit_code, 0) << Describe(attack);
  std::vector<std::string> lines = absl::StrSplit(attack.out, '\n', absl::SkipEmpty());
  EXPECT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines, Each(EndsWith(" 5 5"))) << attack.out;
  EXPECT_TRUE(test::MatchesPattern(secret->data(), 9)) << "the victim's bytes changed";
  EXPECT_EQ(client_->Stats()->transfers.completed, 0u);
}

}  // namespace
}  // namespace memd
