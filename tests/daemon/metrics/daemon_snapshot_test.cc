#include "daemon/metrics/daemon_snapshot.h"

#include <memory>

#include "gtest/gtest.h"
#include "daemon/broker/broker.h"
#include "daemon/pool/pool_set.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/metrics/scripted_pool.h"
#include "tests/support/fake_clock.h"

namespace memd::metrics {
namespace {

TEST(DaemonSnapshotTest, ReadsEachPoolOnceWithTheBrokerAndTheBuild) {
  test::FakeBackend backend;
  test::FakeClock clock;
  pool::PoolSet pools;
  pool::PoolStats figures;
  figures.used_bytes = 4096;
  auto owned = std::make_unique<test::ScriptedPool>(backend, Location::Host(), figures);
  test::ScriptedPool& host = *owned;
  pools.Add(std::move(owned));
  host.set_on_stats([](pool::PoolStats& stats) { stats.used_bytes += 4096; });
  broker::Broker broker(pools, broker::BrokerLimits{}, clock);
  auto session = broker.StartSession({4000, 1000, 1000, {}}, "test");
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(broker.Create(*session, {"a", 100, Location::Host()}).ok());

  DaemonSnapshot snapshot = TakeSnapshot(pools, broker, nullptr, {"1.0", "fake"});

  EXPECT_EQ(host.stats_calls(), 1);
  ASSERT_EQ(snapshot.pools.size(), 1u);
  EXPECT_EQ(snapshot.pools[0].used_bytes, 8192u);
  EXPECT_EQ(snapshot.counts.creating, 1u);
  EXPECT_EQ(snapshot.counts.sessions, 1u);
  ASSERT_EQ(snapshot.usage.size(), 1u);
  EXPECT_EQ(snapshot.usage[0].uid, 1000u);
  EXPECT_EQ(snapshot.build.version, "1.0");
  EXPECT_EQ(snapshot.build.backend, "fake");
}

}  // namespace
}  // namespace memd::metrics
