// What a restarted memd says of its recovery (issue 23): after a kill -9
// under a stand-in for systemd (tests/support/service_manager.h), the next
// memd's Stats, `memctl stats` (text and JSON) and metrics show its
// generation, when it recovered, what it adopted and how long that took.

#include <signal.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "nlohmann/json.hpp"
#include "tests/support/http_get.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1 << 20;

class RecoveryStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto manager = test::ServiceManager::Create({.fd_store_max = 4096});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }

  // memd on the host backend under the manager, metrics on a port of its
  // own choosing (Stats says which).
  void StartMemd(const std::string& grace_seconds = "30") {
    ASSERT_TRUE(manager_
                    ->Start(test::BinDir() + "/memd",
                            {"--socket-dir", dir_.path(), "--backend", "host",
                             "--metrics-address", "127.0.0.1:0", "--recovery-grace-seconds",
                             grace_seconds})
                    .ok());
    ASSERT_TRUE(manager_->WaitReady().ok()) << manager_->WaitReady();
  }

  std::unique_ptr<Client> Connect() { return test::ConnectOrFail(dir_.path()); }

  test::ProgramResult Memctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket-dir", dir_.path()});
    return test::RunProgram(test::BinDir() + "/memctl", args);
  }

  test::TempDir dir_;
  std::unique_ptr<test::ServiceManager> manager_;
};

TEST_F(RecoveryStatsTest, AfterAKillTheNextMemdShowsWhatItTookBackEverywhere) {
  StartMemd();
  std::uint64_t used = 0;
  std::uint64_t segments = 0;
  {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    auto first = client->Stats();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->durability.generation, 1u);
    EXPECT_FALSE(first->durability.recovered);
    EXPECT_TRUE(first->durability.recording) << first->durability.not_recording;
    test::Publish(*client, "weights", 5 * kMiB + 17, 1);
    test::Publish(*client, "small", 3000, 2);
    auto stats = client->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    for (const PoolStats& pool : stats->pools) {
      used += pool.used_bytes;
      segments += pool.segments;
    }
  }
  ASSERT_TRUE(manager_->Kill(SIGKILL).ok());
  ASSERT_TRUE(manager_->Wait().ok());
  const absl::Time restarted = absl::Now();
  StartMemd();

  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  const DurabilityStats& durability = stats->durability;
  EXPECT_TRUE(durability.recording) << durability.not_recording;
  EXPECT_EQ(durability.not_recording, "");
  EXPECT_EQ(durability.generation, 2u);
  EXPECT_TRUE(durability.recovered);
  EXPECT_GE(durability.recovered_at, restarted - absl::Seconds(1));
  EXPECT_LE(durability.recovered_at, absl::Now());
  EXPECT_GT(durability.recovery, absl::ZeroDuration());
  EXPECT_LT(durability.recovery, absl::Seconds(20));
  EXPECT_EQ(durability.adopted_buffers, 2u);
  // The adopted bytes are the buffers' allocations, as the pools counted
  // them before the kill; every segment the pools held came back.
  EXPECT_EQ(durability.adopted_bytes, used);
  EXPECT_EQ(durability.adopted_segments, segments);
  EXPECT_EQ(durability.lost_buffers, 0u);

  test::ProgramResult text = Memctl({"stats"});
  ASSERT_EQ(text.exit_code, 0) << test::Describe(text);
  EXPECT_THAT(text.out, HasSubstr("\ndurability recording\n"));
  EXPECT_THAT(text.out, HasSubstr("\ngeneration 2, recovered "));
  EXPECT_THAT(text.out, HasSubstr(": 2 buffers ("));
  EXPECT_THAT(text.out, HasSubstr(" segment"));
  EXPECT_THAT(text.out, HasSubstr(" adopted, 0 lost\n"));

  test::ProgramResult json = Memctl({"stats", "--json"});
  ASSERT_EQ(json.exit_code, 0) << test::Describe(json);
  const nlohmann::json shown = nlohmann::json::parse(json.out).at("durability");
  EXPECT_EQ(shown.at("generation"), 2);
  EXPECT_EQ(shown.at("recovered"), true);
  EXPECT_EQ(shown.at("recording"), true);
  EXPECT_EQ(shown.at("adopted_buffers"), 2);
  EXPECT_EQ(shown.at("adopted_bytes"), used);
  EXPECT_EQ(shown.at("recovered_unix_ns"), absl::ToUnixNanos(durability.recovered_at));
  EXPECT_EQ(shown.at("recovery_ns"), absl::ToInt64Nanoseconds(durability.recovery));

  auto scrape = test::HttpGet(stats->metrics_address, "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_THAT(scrape->body, HasSubstr("\nmemd_generation 2\n"));
  EXPECT_THAT(scrape->body, HasSubstr("\nmemd_recovery_adopted_buffers 2\n"));
  EXPECT_THAT(scrape->body,
              HasSubstr("\nmemd_recovery_adopted_bytes " + std::to_string(used) + "\n"));
  EXPECT_THAT(scrape->body, HasSubstr("\nmemd_recovery_lost_buffers 0\n"));
  EXPECT_THAT(scrape->body, HasSubstr("\nmemd_durability_recording 1\n"));
  EXPECT_THAT(scrape->body, Not(HasSubstr("\nmemd_recovery_timestamp_seconds 0\n")));
}

// A buffer whose holder died with memd waits for it through the grace
// period, also once unlinked: a Trim gives its memory back only after the
// grace ends. Stats and `memctl stats` say so while it lasts (the restart
// cycles test waits for its end before it unlinks and trims).
TEST_F(RecoveryStatsTest, WhileTheGraceLastsAnUnlinkedBufferWaitsForItsDeadHolderAndStatsSaySo) {
  StartMemd("5");
  {
    auto holder = Connect();
    ASSERT_NE(holder, nullptr);
    test::Publish(*holder, "weights", 3 * kMiB, 1);
    auto stats = holder->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_FALSE(stats->durability.in_grace) << "a memd that recovered nothing has no grace";
    auto held = holder->Open("weights");
    ASSERT_TRUE(held.ok()) << held.status();
    ASSERT_TRUE(manager_->Kill(SIGKILL).ok());
    ASSERT_TRUE(manager_->Wait().ok());
  }  // The holder goes with memd: nobody re-claims its lease.
  StartMemd("5");
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->durability.in_grace);
  EXPECT_EQ(stats->durability.awaiting_holders, 1u);
  EXPECT_EQ(stats->durability.reclaimable_leases, 1u);
  test::ProgramResult text = Memctl({"stats"});
  ASSERT_EQ(text.exit_code, 0) << test::Describe(text);
  EXPECT_THAT(text.out, HasSubstr("\ngrace period on: 1 buffer waits for its holders (kept "
                                  "until it ends, even if unlinked), 1 lease may be "
                                  "re-claimed\n"));

  ASSERT_TRUE(client->Unlink("weights").ok());
  ASSERT_TRUE(client->Trim().ok());
  auto during = client->Stats();
  ASSERT_TRUE(during.ok()) << during.status();
  ASSERT_TRUE(during->durability.in_grace)
      << "the grace period (5 s) ended before the test looked again";
  std::uint64_t segments = 0;
  for (const PoolStats& pool : during->pools) segments += pool.segments;
  EXPECT_EQ(segments, 1u) << "the buffer went before its holder's grace ended";

  ASSERT_TRUE(test::PollUntil([&] {
    auto now = client->Stats();
    return now.ok() && !now->durability.in_grace;
  })) << "the grace period never ended";
  auto after = client->Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->durability.awaiting_holders, 0u);
  EXPECT_EQ(after->durability.reclaimable_leases, 0u);
  ASSERT_TRUE(client->Trim().ok());
  after = client->Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  segments = 0;
  for (const PoolStats& pool : after->pools) segments += pool.segments;
  EXPECT_EQ(segments, 0u) << "the buffer outlived its holder's grace";
  EXPECT_THAT(Memctl({"stats"}).out, Not(HasSubstr("grace period")));
}

}  // namespace
}  // namespace memd
