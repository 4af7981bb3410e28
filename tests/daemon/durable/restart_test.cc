// Buffers outlive memd (issue 23): memd runs under a stand-in for systemd
// (tests/support/service_manager.h: the notify socket and the descriptor
// store, as systemd 252 keeps them), is killed with SIGKILL, restarted or
// stopped, and what clients find afterwards is checked byte for byte.

#include <signal.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using test::Describe;
using test::ExpectPattern;
using test::ListedNames;
using test::Publish;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = test::ServiceManager::Create({.fd_store_max = 4096});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }

  // Starts memd on the host backend under the manager, ready to serve.
  void StartMemd(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--socket-dir", dir_.path(), "--backend", "host",
                                     "--metrics-address", "", "--log-level", "debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(manager_->Start(test::BinDir() + "/memd", args).ok());
    ASSERT_TRUE(manager_->WaitReady().ok()) << manager_->WaitReady();
  }

  std::unique_ptr<Client> Connect() { return test::ConnectOrFail(dir_.path()); }
  void KillMemd() { test::KillWithSigkill(*manager_); }

  test::TempDir dir_;
  std::unique_ptr<test::ServiceManager> manager_;
};

TEST_F(RestartTest, SealedBuffersComeBackAfterAKillWithTheirBytesAndEverythingMemdKnew) {
  StartMemd();
  std::vector<std::string> before;
  std::vector<PoolStats> pools_before;
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    Publish(*client, "small/a", 3000, 1);          // Size classes.
    Publish(*client, "small/b", 70 * kKiB, 2, {.mode = 0640});
    Publish(*client, "large/weights", 5 * kMiB + 17, 3,
            {.mode = 0644, .attrs = {{"dtype", "float16"}, {"shape", "4096,640"}},
             .retention = "evictable"});
    Publish(*client, "pinned/x", 2 * kMiB, 4, {.location = "pinned", .numa = "0"});
    auto listed = client->List();
    ASSERT_TRUE(listed.ok());
    before = Describe(*listed);
    auto stats = client->Stats();
    ASSERT_TRUE(stats.ok());
    pools_before = stats->pools;
  }
  KillMemd();
  StartMemd();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto listed = client->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(Describe(*listed), before);
  ExpectPattern(*client, "small/a", 1);
  ExpectPattern(*client, "small/b", 2);
  ExpectPattern(*client, "large/weights", 3);
  ExpectPattern(*client, "pinned/x", 4);
  EXPECT_EQ(client->Stat("large/weights")->retention, "evictable");
  EXPECT_EQ(client->Stat("small/a")->retention, "pinned");
  EXPECT_EQ(client->Stat("pinned/x")->numa_node, 0);
  EXPECT_EQ(client->Stat("small/a")->numa_node, -1);
  // The pools hold what they held: the same segments, the same bytes.
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->pools.size(), pools_before.size());
  for (std::size_t i = 0; i < pools_before.size(); ++i) {
    SCOPED_TRACE(pools_before[i].location);
    EXPECT_EQ(stats->pools[i].reserved_bytes, pools_before[i].reserved_bytes);
    EXPECT_EQ(stats->pools[i].used_bytes, pools_before[i].used_bytes);
    EXPECT_EQ(stats->pools[i].segments, pools_before[i].segments);
  }
  // And new buffers never land on the old ones' bytes.
  Publish(*client, "small/c", 3000, 5);
  Publish(*client, "large/more", 5 * kMiB, 6);
  ExpectPattern(*client, "small/a", 1);
  ExpectPattern(*client, "large/weights", 3);
}

// What a running client sees of a crash: its mappings stay valid throughout
// (the memory is its own reference), calls during the outage fail
// UNAVAILABLE rather than hang, and the same Client connects again by itself
// once memd is back and takes its leases back: it finishes the buffer it
// was writing through the same Buffer.
TEST_F(RestartTest, AClientKeepsItsMappingsAndLeasesThroughAnOutageAndConnectsAgainByItself) {
  StartMemd();
  auto client = Client::Connect({.socket_dir = dir_.path(), .call_timeout = absl::Seconds(5)});
  ASSERT_TRUE(client.ok()) << client.status();
  Publish(**client, "weights", 64 * kKiB, 9);
  auto held = (*client)->Open("weights");
  ASSERT_TRUE(held.ok()) << held.status();
  auto unsealed = (*client)->Create("draft", 4096);
  ASSERT_TRUE(unsealed.ok()) << unsealed.status();
  test::FillPattern(unsealed->mutable_data(), 10);
  KillMemd();

  EXPECT_TRUE(test::MatchesPattern(held->data(), 9));
  auto during = (*client)->Stat("weights");
  EXPECT_EQ(during.status().code(), absl::StatusCode::kUnavailable) << during.status();
  auto open_during = (*client)->Open("weights");
  EXPECT_EQ(open_during.status().code(), absl::StatusCode::kUnavailable);

  StartMemd();
  auto again = (*client)->Open("weights");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(test::MatchesPattern(again->data(), 9));
  EXPECT_TRUE(test::MatchesPattern(held->data(), 9));
  const absl::Status sealed = unsealed->Seal();
  EXPECT_TRUE(sealed.ok()) << sealed;
  ExpectPattern(**client, "draft", 10);
  EXPECT_TRUE(held->Release().ok());
  EXPECT_TRUE(unsealed->Release().ok());
}

// A pool limit lowered across a restart destroys nothing: memd adopts what
// it held past the new limit, and refuses to grow until buffers go.
TEST_F(RestartTest, ALowerPoolLimitAfterARestartKeepsEveryBuffer) {
  StartMemd();
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    for (int i = 0; i < 4; ++i) Publish(*client, absl::StrCat("big/", i), 3 * kMiB, 40 + i);
  }
  KillMemd();
  StartMemd({"--host-pool-limit-bytes", "8MiB"});
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 4; ++i) ExpectPattern(*client, absl::StrCat("big/", i), 40 + i);
  auto more = client->Create("big/more", 3 * kMiB);
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted) << more.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Unlink(absl::StrCat("big/", i)).ok());
  ASSERT_TRUE(client->Trim().ok());
  EXPECT_TRUE(client->Create("big/more", 3 * kMiB).ok());
}

TEST_F(RestartTest, AdoptedBuffersSurviveMoreThanOneCrash) {
  StartMemd();
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    Publish(*client, "kept", 100 * kKiB, 7);
  }
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    KillMemd();
    StartMemd();
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    ExpectPattern(*client, "kept", 7);
    Publish(*client, absl::StrCat("round/", round), 10 * kKiB, 10 + round);
  }
  KillMemd();
  StartMemd();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  for (int round = 0; round < 3; ++round) {
    ExpectPattern(*client, absl::StrCat("round/", round), 10 + round);
  }
}

TEST_F(RestartTest, UnsealedAndEphemeralBuffersGoOnceTheGracePeriodEnds) {
  StartMemd({"--recovery-grace-seconds", "1"});
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    Publish(*client, "persistent", 4096, 1);
    // Held while memd dies: an ephemeral buffer lives on its leases.
    auto ephemeral =
        client->Create("ephemeral", 4096, {.persistence = Persistence::kEphemeral});
    ASSERT_TRUE(ephemeral.ok());
    ASSERT_TRUE(ephemeral->Seal().ok());
    auto unsealed = client->Create("unsealed", 4096);
    ASSERT_TRUE(unsealed.ok());
    KillMemd();
  }
  // Within the grace period all three are there: their holders could come
  // back for them.
  StartMemd({"--recovery-grace-seconds", "3600"});
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    EXPECT_THAT(ListedNames(*client), ElementsAre("ephemeral", "persistent", "unsealed"));
    KillMemd();
  }
  StartMemd({"--recovery-grace-seconds", "1"});
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::vector<std::string> names;
  ASSERT_TRUE(test::PollUntil([&] {
    names = ListedNames(*client);
    return names.size() == 1;
  }));
  EXPECT_THAT(names, ElementsAre("persistent"));
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->buffers, 1u);
}

TEST_F(RestartTest, ARestartKeepsBuffersAndAStopDropsThem) {
  StartMemd();
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    Publish(*client, "weights", 64 * kKiB, 3);
  }
  ASSERT_TRUE(manager_->Restart().ok());  // SIGTERM: memd shuts down cleanly.
  ASSERT_TRUE(manager_->WaitReady().ok());
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    ExpectPattern(*client, "weights", 3);
  }
  auto stopped = manager_->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_THAT(manager_->Current().stored_names, IsEmpty());
  StartMemd();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  test::ExpectNothingHeld(*client);
}

TEST_F(RestartTest, AStateThatCannotBeReadStartsMemdEmptyAndNothingOfItIsKept) {
  StartMemd();
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    Publish(*client, "weights", 64 * kKiB, 3);
  }
  KillMemd();
  // Scribble over the state file's first bytes, as a bug or a stray write
  // would.
  int scribbled = 0;
  for (const std::string& name : manager_->Current().stored_names) {
    if (name.rfind("memd.state.", 0) != 0) continue;
    for (UniqueFd& fd : manager_->DupStored(name)) {
      const char garbage[64] = "not a state file, not at all";
      ASSERT_EQ(::pwrite(fd.get(), garbage, sizeof(garbage), 0), 64);
      ++scribbled;
    }
  }
  ASSERT_EQ(scribbled, 1);
  StartMemd();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  test::ExpectNothingHeld(*client);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  // Stats say what was lost, not a fresh start: nothing recovered, the
  // segment that held the buffer dropped.
  EXPECT_FALSE(stats->durability.recovered);
  EXPECT_EQ(stats->durability.generation, 1u);
  EXPECT_EQ(stats->durability.lost_segments, 1u);
  // Only the new state file is kept: the segments were let go.
  std::vector<std::string> stored = manager_->Current().stored_names;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_THAT(stored[0], HasSubstr("memd.state."));
}

}  // namespace
}  // namespace memd
