// Issue 26: a full location takes back other users' unheld evictable data
// so that a create fits. What an attacker flooding a location must not get
// from that: another user's pinned buffer, a buffer someone holds, or the
// names of what went.

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"
#include "tests/client/pattern.h"

namespace memd {
namespace {

using ::memd::test::Describe;
using ::memd::test::kMallory;
using ::memd::test::ProgramResult;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr std::uint64_t kMiB = 1 << 20;

class PressureAttackTest : public test::OpenDaemonTest {};

TEST_F(PressureAttackTest, AFloodTakesNoOtherUsersPinnedOrHeldBufferAndLearnsNoName) {
  config_.host_pool_limit_bytes = 8 * kMiB;  // Four 2 MiB buffers.
  StartDaemon();
  auto victim = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(victim.ok()) << victim.status();
  std::vector<Buffer> held;
  int seed = 0;
  for (const char* retention : {"pinned", "evictable", "evictable"}) {
    const std::string name = std::string("victim/") + (seed == 1 ? "held" : retention);
    auto buffer = (*victim)->Create(name, 2 * kMiB, {.retention = retention});
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    test::FillPattern(buffer->mutable_data(), seed++);
    ASSERT_TRUE(buffer->Seal().ok());
    if (name == "victim/held") held.push_back(std::move(*buffer));
  }

  // One buffer fits as it is; the next takes the victim's unheld evictable
  // one (the victim holds more than its share); then nothing may go.
  ProgramResult mallory =
      Hostile(kMallory, {"fill_buffers", "mallory", std::to_string(2 * kMiB), "100"});
  ASSERT_EQ(mallory.exit_code, 0) << Describe(mallory);
  EXPECT_THAT(mallory.out, StartsWith("buffers 2\n")) << Describe(mallory);
  EXPECT_THAT(mallory.out, HasSubstr("RESOURCE_EXHAUSTED: ")) << Describe(mallory);
  EXPECT_THAT(mallory.out, HasSubstr("nothing could give way")) << Describe(mallory);
  EXPECT_THAT(mallory.out, Not(HasSubstr("victim"))) << "names stay private";

  auto pinned = (*victim)->Open("victim/pinned");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_TRUE(test::MatchesPattern(pinned->data(), 0));
  EXPECT_TRUE(test::MatchesPattern(held.front().data(), 1));
  auto gone = (*victim)->Stat("victim/evictable");
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("evicted at"));
}

// Where and for how much others wait for memory is theirs: Stats tell a
// uid only of its own waits, root of everyone's.
TEST_F(PressureAttackTest, NoUidLearnsOfAnothersWaitsForMemory) {
  config_.host_pool_limit_bytes = 8 * kMiB;
  StartDaemon();
  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<Buffer> full = (*root)->Create("root/full", 6 * kMiB);
  ASSERT_TRUE(full.ok()) << full.status();
  absl::StatusOr<Buffer> waited = absl::UnknownError("not yet");
  std::thread waiter([&] {
    waited = (*root)->Create("root/waits", 4 * kMiB, {.wait_for_memory = absl::Seconds(60)});
  });
  ASSERT_TRUE(test::PollUntil([&] {
    auto stats = (*root)->Stats();
    return stats.ok() && stats->memory_waits.size() == 1;
  }));
  ProgramResult mallory = Hostile(kMallory, {"show_stats", "mallory"});
  EXPECT_EQ(mallory.out,
            "daemon_wide 0 buffers 1 sessions 1 leases 1 waits 0 active 0 active_bytes 0 "
            "completed 0 memory_waits 0\n")
      << Describe(mallory);
  ASSERT_TRUE((*root)->Unlink("root/full").ok());
  full = absl::UnknownError("released");
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.status();
}

// A uid over its fair share of a location cannot push another's data out:
// Mallory, opening a copy larger than her share of pinned memory and
// dropping it in a loop, would otherwise demote the victim's copy every
// round the victim re-made it (memd thrashing for her). Her copies fail
// instead, saying why; the victim's stays, and its re-opens copy nothing.
TEST_F(PressureAttackTest, AUidOverItsShareCannotThrashAnothersCopiesByOpeningAndDropping) {
  config_.pinned_pool_limit_bytes = 8 * kMiB;
  StartDaemon();
  auto victim = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(victim.ok()) << victim.status();
  auto weights = (*victim)->Create("victim/weights", 2 * kMiB,
                                   {.mode = 0600, .retention = "demotable"});
  ASSERT_TRUE(weights.ok()) << weights.status();
  test::FillPattern(weights->mutable_data(), 3);
  ASSERT_TRUE(weights->Seal().ok());
  auto open_there = [&] {
    auto copy = (*victim)->Open("victim/weights", {.location = "pinned"});
    EXPECT_TRUE(copy.ok()) << copy.status();
    if (copy.ok()) {
      EXPECT_TRUE(test::MatchesPattern(copy->data(), 3));
    }
  };
  open_there();  // Its copy at pinned: demotable, and nobody holds it now.
  auto usage = [&] {
    auto info = (*victim)->Stat("victim/weights");
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->usage : BufferUsage{};
  };
  ASSERT_EQ(usage().lazy_copies, 1u);

  // 7 MiB fits only if the victim's 2 MiB copy goes: 7 of 9 MiB is over
  // Mallory's share of 2 users.
  ProgramResult mallory = Hostile(
      kMallory, {"open_drop_loop", "mallory/big", std::to_string(7 * kMiB), "pinned", "20"});
  ASSERT_EQ(mallory.exit_code, 0) << Describe(mallory);
  EXPECT_THAT(mallory.out, StartsWith("copies 0\nRESOURCE_EXHAUSTED: ")) << Describe(mallory);
  EXPECT_THAT(mallory.out, HasSubstr("over its fair share (2 users), so only its own data may "
                                     "give way"));
  EXPECT_THAT(mallory.out, Not(HasSubstr("victim"))) << "names stay private";
  const absl::StatusOr<DaemonStats> stats = (*victim)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const PoolStats& pool : stats->pools) EXPECT_EQ(pool.demotions, 0u) << pool.location;
  open_there();  // Served by the copy that stayed.
  EXPECT_EQ(usage().lazy_copies, 1u) << "nothing was copied again";
  EXPECT_EQ(usage().copies_avoided, 1u);
  // Within her share she may have room: 4 MiB fits beside the victim's copy
  // without taking anything.
  ProgramResult fair = Hostile(
      kMallory, {"open_drop_loop", "mallory/fair", std::to_string(4 * kMiB), "pinned", "3"});
  EXPECT_THAT(fair.out, StartsWith("copies 3\n")) << Describe(fair);
}

// A raw client asks for absurd waits and retentions libmemd would never
// send: each is INVALID_ARGUMENT in a short message, and nothing waits.
TEST_F(PressureAttackTest, AbsurdWaitsAndRetentionsAreRefusedBeforeAnythingWaits) {
  StartDaemon();
  test::RawSession raw = test::RawSession::Open(config_.socket_dir);
  v1::CreateRequest create;
  create.set_name("mallory/absurd");
  create.set_size_bytes(4096);
  create.set_wait_for_memory_ms(~std::uint64_t{0});
  v1::Lease lease;
  grpc::Status status = raw.Call(&v1::Memd::Stub::Create, create, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait_for_memory_ms 18446744073709551615 "
                                                "exceeds the maximum"));
  create.set_wait_for_memory_ms(1000);
  create.set_retention(std::string(1 << 20, 'r'));
  status = raw.Call(&v1::Memd::Stub::Create, create, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("a retention of 1048576 bytes"));
  EXPECT_LT(status.error_message().size(), 200u);
  // OpenOrCreate, which may wait for memory too, checks the same.
  v1::OpenOrCreateRequest either;
  *either.mutable_create() = create;
  either.mutable_create()->clear_retention();
  either.mutable_create()->set_wait_for_memory_ms(~std::uint64_t{0});
  status = raw.Call(&v1::Memd::Stub::OpenOrCreate, either, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait_for_memory_ms 18446744073709551615 "
                                                "exceeds the maximum"));
  // So do the opens and prefetches whose copies may wait for memory,
  // whether or not the buffer exists, and an open that makes no copy.
  v1::OpenRequest open;
  open.set_name("mallory/absurd");
  open.set_location("host");
  open.set_wait_for_memory_ms(~std::uint64_t{0});
  status = raw.Call(&v1::Memd::Stub::Open, open, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait_for_memory_ms 18446744073709551615 "
                                                "exceeds the maximum"));
  open.set_wait_for_memory_ms(1000);
  open.set_wait_timeout_ms(~std::uint64_t{0});
  status = raw.Call(&v1::Memd::Stub::Open, open, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait_timeout_ms 18446744073709551615 "
                                                "exceeds the maximum"));
  open.set_wait_timeout_ms(0);
  open.clear_location();
  status = raw.Call(&v1::Memd::Stub::Open, open, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("needs a location"));
  v1::PrefetchRequest prefetch;
  prefetch.set_name("mallory/absurd");
  prefetch.set_location("host");
  prefetch.set_wait_for_memory_ms(~std::uint64_t{0});
  v1::BufferInfo info;
  status = raw.Call(&v1::Memd::Stub::Prefetch, prefetch, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("wait_for_memory_ms 18446744073709551615 "
                                                "exceeds the maximum"));
  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ((*root)->Stats()->waits, 0u);
  EXPECT_TRUE(absl::IsNotFound((*root)->Stat("mallory/absurd").status()));
}

}  // namespace
}  // namespace memd
