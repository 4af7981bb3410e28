// Issue 26: a full location takes back other users' unheld evictable data
// so that a create fits. What an attacker flooding a location must not get
// from that: another user's pinned buffer, a buffer someone holds, or the
// names of what went.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
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

}  // namespace
}  // namespace memd
