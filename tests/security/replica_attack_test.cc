// Issue 25: an open at a location makes the daemon copy a buffer there,
// charged to the opener. What another uid must not get from that: a copy
// of a buffer it may not read, a write into a copy it only reads, memory
// past its quota at the device, or the transfer engine to itself.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/slow_copies.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::kAlice;
using ::memd::test::kBob;
using ::memd::test::kMallory;
using ::memd::test::kMiB;
using ::memd::test::ProgramResult;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ReplicaAttackTest : public test::SlowCopyDaemonTest {
 protected:
  // Root's view: every buffer, every uid.
  std::unique_ptr<Client> Root() {
    auto client = Client::Connect({.socket_dir = config_.socket_dir});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  void Publish(const std::string& name, const std::string& mode) {
    ProgramResult made =
        Hostile(kAlice, {"publish_text", name, std::string(64 << 10, 'a'), mode});
    ASSERT_EQ(made.exit_code, 0) << Describe(made);
  }

  BufferInfo Stat(Client& root, const std::string& name) {
    auto info = root.Stat(name);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : BufferInfo{};
  }
};

TEST_F(ReplicaAttackTest, AnOpenAtADeviceWithoutReadPermissionMakesNoCopy) {
  StartDaemon();
  Publish("alice/private", "600");
  Publish("alice/shared", "644");
  ProgramResult attack = Hostile(kMallory, {"open_at", "alice/private", "device:0"});
  EXPECT_EQ(attack.exit_code, 0) << Describe(attack);
  EXPECT_THAT(attack.out, StartsWith("open PERMISSION_DENIED: ")) << Describe(attack);
  // The same step, where the mode allows it, makes the copy.
  ProgramResult allowed = Hostile(kBob, {"open_at", "alice/shared", "device:0"});
  EXPECT_EQ(allowed.out, "open OK\n") << Describe(allowed);

  auto root = Root();
  ASSERT_NE(root, nullptr);
  BufferInfo refused = Stat(*root, "alice/private");
  EXPECT_EQ(refused.replicas.size(), 1u);
  EXPECT_EQ(refused.usage.lazy_copies, 0u);
  EXPECT_EQ(Stat(*root, "alice/shared").replicas.size(), 2u);
  auto stats = root->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->transfers.completed, 1u) << "Bob's copy alone";
}

TEST_F(ReplicaAttackTest, AReadersCopyTakesNoCopyIntoIt) {
  StartDaemon();
  Publish("alice/shared", "644");
  ProgramResult attack = Hostile(kMallory, {"write_replica", "alice/shared", "device:0"});
  EXPECT_EQ(attack.exit_code, 0) << Describe(attack);
  EXPECT_THAT(attack.out, StartsWith("open OK\ncopy FAILED_PRECONDITION: ")) << Describe(attack);

  auto root = Root();
  ASSERT_NE(root, nullptr);
  BufferInfo info = Stat(*root, "alice/shared");
  EXPECT_EQ(info.sync_state, "synchronized");
  ASSERT_EQ(info.replicas.size(), 2u);
  EXPECT_EQ(info.replicas[1].generation, info.generation);
  EXPECT_EQ(info.replicas[1].writers, 0u);
}

TEST_F(ReplicaAttackTest, ACopyBeyondTheOpenersQuotaAtTheDeviceIsRefusedAndKeepsNothing) {
  config_.max_uid_bytes = "device:0=4KiB";
  StartDaemon();
  Publish("alice/shared", "644");
  ProgramResult attack = Hostile(kMallory, {"open_at", "alice/shared", "device:0"});
  EXPECT_EQ(attack.exit_code, 0) << Describe(attack);
  EXPECT_THAT(attack.out, StartsWith("open RESOURCE_EXHAUSTED: ")) << Describe(attack);
  EXPECT_THAT(attack.out, HasSubstr("max_uid_bytes")) << Describe(attack);

  auto root = Root();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Stat(*root, "alice/shared").replicas.size(), 1u);
  auto usage = root->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  for (const UidUsage& entry : *usage) {
    EXPECT_FALSE(entry.uid == kMallory && entry.location == "device:0" && entry.bytes > 0)
        << entry.bytes << " bytes stay charged to mallory at device:0";
  }
}

TEST_F(ReplicaAttackTest, APrefetchFloodIsBoundedByTransferAdmissionAndOthersStillOpen) {
  config_.transfer_max_uid_transfers = 4;
  StartSlowDaemon();
  Publish("alice/shared", "644");
  // 16 copies of 4 MiB at 10 MB/s: the first four stay unfinished while
  // the rest are asked for. A prefetch that does not wait is answered before
  // its copy starts, so the engine's refusal is each buffer's fill failure.
  ProgramResult flood = Hostile(
      kMallory, {"prefetch_flood", "mallory/flood", "16", std::to_string(4 * kMiB), "device:0"});
  EXPECT_EQ(flood.exit_code, 0) << Describe(flood);
  EXPECT_THAT(flood.out, StartsWith("prefetches 16\n")) << Describe(flood);
  auto root = Root();
  ASSERT_NE(root, nullptr);
  auto stats = root->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->transfers.rejected, 12u);
  int refused = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string failure = Stat(*root, "mallory/flood/" + std::to_string(i)).fill_failure;
    if (failure.find("RESOURCE_EXHAUSTED: uid 61003 has 4 unfinished transfers; the limit is 4 "
                     "(transfer_max_uid_transfers)") != std::string::npos) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, 12);

  ProgramResult bob = Hostile(kBob, {"open_at", "alice/shared", "device:0"});
  EXPECT_EQ(bob.out, "open OK\n") << Describe(bob);
}

}  // namespace
}  // namespace memd
