#include "daemon/metrics/daemon_collectable.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/quota.h"
#include "daemon/pool/pool_set.h"
#include "daemon/transfer/engine.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/metrics/scripted_pool.h"
#include "tests/support/fake_clock.h"

namespace memd::metrics {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

pool::PoolStats HostStats() {
  pool::PoolStats stats;
  stats.reserved_bytes = 8 * kMiB;
  stats.used_bytes = 3 * kMiB;
  stats.peak_reserved_bytes = 9 * kMiB;
  stats.peak_used_bytes = 4 * kMiB;
  stats.hit_count = 3;
  stats.miss_count = 1;
  stats.largest_free_bytes = 4 * kMiB;
  stats.segments = 2;
  stats.scrubbed_bytes = 4096;
  stats.trimmed_bytes = 8192;
  stats.limit_bytes = 64 * kMiB;
  stats.limit_rejections = 5;
  stats.size_classes = {{4096, 7, 2}, {65536, 1, 0}};
  return stats;
}

pool::PoolStats DeviceStats() {
  pool::PoolStats stats;
  stats.reserved_bytes = 2 * kMiB;
  stats.limit_bytes = 16 * kMiB;
  return stats;
}

// A daemon's pools and broker with a little of everything: two pools (one a
// device), a buffer being written, a sealed one, a refusal at max_buffers
// and one at a uid byte quota.
class DaemonCollectableTest : public ::testing::Test {
 protected:
  DaemonCollectableTest() {
    auto host = std::make_unique<test::ScriptedPool>(backend_, Location::Host(), HostStats());
    auto device =
        std::make_unique<test::ScriptedPool>(backend_, Location::Device(0), DeviceStats());
    host_ = host.get();
    device_ = device.get();
    pools_.Add(std::move(host));
    pools_.Add(std::move(device));
    broker::BrokerLimits limits;
    limits.max_buffers = 3;
    limits.max_uid_bytes = *broker::Quota::Parse("device:0=1M");
    broker_ = std::make_unique<broker::Broker>(pools_, limits, clock_);
  }

  void Populate() {
    auto session = broker_->StartSession({4000, 1000, 1000, {}}, "test");
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE(broker_->Create(*session, {"writing", 4096, Location::Host()}).ok());
    auto sealed = broker_->Create(*session, {"sealed", 4096, Location::Host()});
    ASSERT_TRUE(sealed.ok()) << sealed.status();
    ASSERT_TRUE(broker_->Seal(*session, sealed->lease).ok());
    EXPECT_FALSE(broker_->Create(*session, {"big", 2 * kMiB, Location::Device(0)}).ok());
    ASSERT_TRUE(broker_->Create(*session, {"third", 4096, Location::Host()}).ok());
    EXPECT_FALSE(broker_->Create(*session, {"fourth", 4096, Location::Host()}).ok());
  }

  std::string Scrape(const DaemonCollectable& collectable) {
    std::ostringstream text;
    prometheus::TextSerializer().Serialize(text, collectable.Collect());
    return text.str();
  }

  test::FakeBackend backend_;
  test::FakeClock clock_;
  pool::PoolSet pools_;
  test::ScriptedPool* host_ = nullptr;
  test::ScriptedPool* device_ = nullptr;
  std::unique_ptr<broker::Broker> broker_;
};

// What the scrape below showed before the families became a table; kept
// byte for byte.
constexpr char kGolden[] = R"(# HELP memd_pool_reserved_bytes Bytes the pool holds from the backend, used or not.
# TYPE memd_pool_reserved_bytes gauge
memd_pool_reserved_bytes{location="host"} 8388608
memd_pool_reserved_bytes{location="device:0",device="0"} 2097152
# HELP memd_pool_used_bytes Bytes handed out in live buffers.
# TYPE memd_pool_used_bytes gauge
memd_pool_used_bytes{location="host"} 3145728
memd_pool_used_bytes{location="device:0",device="0"} 0
# HELP memd_pool_free_bytes Reserved bytes not in use (kept for reuse).
# TYPE memd_pool_free_bytes gauge
memd_pool_free_bytes{location="host"} 5242880
memd_pool_free_bytes{location="device:0",device="0"} 2097152
# HELP memd_pool_limit_bytes Most bytes the pool may reserve.
# TYPE memd_pool_limit_bytes gauge
memd_pool_limit_bytes{location="host"} 67108864
memd_pool_limit_bytes{location="device:0",device="0"} 16777216
# HELP memd_pool_segments Backend segments the pool holds.
# TYPE memd_pool_segments gauge
memd_pool_segments{location="host"} 2
memd_pool_segments{location="device:0",device="0"} 0
# HELP memd_pool_requests_total Allocations by result: hit = served without the backend, miss = not.
# TYPE memd_pool_requests_total counter
memd_pool_requests_total{location="host",result="hit"} 3
memd_pool_requests_total{location="host",result="miss"} 1
memd_pool_requests_total{location="device:0",device="0",result="hit"} 0
memd_pool_requests_total{location="device:0",device="0",result="miss"} 0
# HELP memd_pool_hit_ratio hits / (hits + misses) since start; 0 before any.
# TYPE memd_pool_hit_ratio gauge
memd_pool_hit_ratio{location="host"} 0.75
memd_pool_hit_ratio{location="device:0",device="0"} 0
# HELP memd_pool_peak_reserved_bytes Most bytes the pool ever held from the backend.
# TYPE memd_pool_peak_reserved_bytes gauge
memd_pool_peak_reserved_bytes{location="host"} 9437184
memd_pool_peak_reserved_bytes{location="device:0",device="0"} 0
# HELP memd_pool_peak_used_bytes Most bytes ever in live buffers at once.
# TYPE memd_pool_peak_used_bytes gauge
memd_pool_peak_used_bytes{location="host"} 4194304
memd_pool_peak_used_bytes{location="device:0",device="0"} 0
# HELP memd_pool_largest_free_block_bytes Largest contiguous free block.
# TYPE memd_pool_largest_free_block_bytes gauge
memd_pool_largest_free_block_bytes{location="host"} 4194304
memd_pool_largest_free_block_bytes{location="device:0",device="0"} 0
# HELP memd_pool_fragmentation_ratio 1 - largest free block / free bytes: 0 when free memory is one block.
# TYPE memd_pool_fragmentation_ratio gauge
memd_pool_fragmentation_ratio{location="host"} 0.2
memd_pool_fragmentation_ratio{location="device:0",device="0"} 1
# HELP memd_pool_scrubbed_bytes_total Bytes zeroed before serving another owner/group/mode.
# TYPE memd_pool_scrubbed_bytes_total counter
memd_pool_scrubbed_bytes_total{location="host"} 4096
memd_pool_scrubbed_bytes_total{location="device:0",device="0"} 0
# HELP memd_pool_trimmed_bytes_total Bytes given back to the backend.
# TYPE memd_pool_trimmed_bytes_total counter
memd_pool_trimmed_bytes_total{location="host"} 8192
memd_pool_trimmed_bytes_total{location="device:0",device="0"} 0
# HELP memd_pool_size_class_allocations_total Allocations served per size class.
# TYPE memd_pool_size_class_allocations_total counter
memd_pool_size_class_allocations_total{location="host",size_class="4096"} 7
memd_pool_size_class_allocations_total{location="host",size_class="65536"} 1
# HELP memd_pool_size_class_cached_blocks Freed blocks a size class holds for reuse.
# TYPE memd_pool_size_class_cached_blocks gauge
memd_pool_size_class_cached_blocks{location="host",size_class="4096"} 2
memd_pool_size_class_cached_blocks{location="host",size_class="65536"} 0
# HELP memd_quota_rejections_total Requests refused because a limit was reached, by limit (pool: a location's reserved-bytes limit, with its location).
# TYPE memd_quota_rejections_total counter
memd_quota_rejections_total{location="host",limit="pool"} 5
memd_quota_rejections_total{location="device:0",device="0",limit="pool"} 0
memd_quota_rejections_total{limit="max_buffers"} 1
memd_quota_rejections_total{limit="max_sessions"} 0
memd_quota_rejections_total{limit="max_leases_per_session"} 0
memd_quota_rejections_total{limit="max_session_bytes",location="device:0"} 0
memd_quota_rejections_total{limit="max_session_bytes",location="host"} 0
memd_quota_rejections_total{limit="max_uid_bytes",location="device:0"} 1
memd_quota_rejections_total{limit="max_uid_bytes",location="host"} 0
memd_quota_rejections_total{limit="max_waits_per_session"} 0
memd_quota_rejections_total{limit="max_sessions_per_uid"} 0
memd_quota_rejections_total{limit="max_buffers_per_uid"} 0
memd_quota_rejections_total{limit="max_leases_per_uid"} 0
memd_quota_rejections_total{limit="max_waits_per_uid"} 0
memd_quota_rejections_total{limit="max_waits"} 0
# HELP memd_buffers Buffers alive, by state: creating (not sealed yet), sealed, unlinked (no name, still leased).
# TYPE memd_buffers gauge
memd_buffers{state="creating"} 2
memd_buffers{state="sealed"} 1
memd_buffers{state="unlinked"} 0
# HELP memd_buffers_by_sync_state Named buffers by where their current copies are: host_only, device_only, synchronized, host_dirty, device_dirty, mixed (docs/design.md, Replicas).
# TYPE memd_buffers_by_sync_state gauge
memd_buffers_by_sync_state{state="device_dirty"} 0
memd_buffers_by_sync_state{state="device_only"} 0
memd_buffers_by_sync_state{state="host_dirty"} 0
memd_buffers_by_sync_state{state="host_only"} 3
memd_buffers_by_sync_state{state="mixed"} 0
memd_buffers_by_sync_state{state="synchronized"} 0
# HELP memd_replicas Copies of named buffers away from their homes (and copies an unlink orphaned that leases or copies still hold).
# TYPE memd_replicas gauge
memd_replicas 0
# HELP memd_replica_copies_total Copies made into replicas: first fills of a location and refreshes of stale ones.
# TYPE memd_replica_copies_total counter
memd_replica_copies_total 0
# HELP memd_replica_bytes_copied_total Bytes copied into replicas, by direction (host_to_device, device_to_host, device_to_device, host_to_host; pinned counts as host).
# TYPE memd_replica_bytes_copied_total counter
# HELP memd_replica_copies_avoided_total Opens away from a buffer's home served by a copy that was there already.
# TYPE memd_replica_copies_avoided_total counter
memd_replica_copies_avoided_total 0
# HELP memd_pressure_reclaims_total What a full location (or a uid's quota there, of that uid's own data) took back so that a create or a copy fits, by kind: evicted (a whole unleased buffer of retention evictable), demoted (an unleased copy away from its buffer's home; the next open there makes it again).
# TYPE memd_pressure_reclaims_total counter
memd_pressure_reclaims_total{location="host",kind="evicted"} 0
memd_pressure_reclaims_total{location="host",kind="demoted"} 0
memd_pressure_reclaims_total{location="device:0",device="0",kind="evicted"} 0
memd_pressure_reclaims_total{location="device:0",device="0",kind="demoted"} 0
# HELP memd_pressure_reclaimed_bytes_total Bytes memory pressure took back, by kind (as memd_pressure_reclaims_total).
# TYPE memd_pressure_reclaimed_bytes_total counter
memd_pressure_reclaimed_bytes_total{location="host",kind="evicted"} 0
memd_pressure_reclaimed_bytes_total{location="host",kind="demoted"} 0
memd_pressure_reclaimed_bytes_total{location="device:0",device="0",kind="evicted"} 0
memd_pressure_reclaimed_bytes_total{location="device:0",device="0",kind="demoted"} 0
# HELP memd_memory_waits Calls waiting for memory at the location now (wait_for_memory: creates, copies): its pool is full and nothing there may give way.
# TYPE memd_memory_waits gauge
memd_memory_waits{location="host"} 0
memd_memory_waits{location="device:0",device="0"} 0
# HELP memd_memory_wait_bytes Bytes the calls waiting for memory at the location ask for.
# TYPE memd_memory_wait_bytes gauge
memd_memory_wait_bytes{location="host"} 0
memd_memory_wait_bytes{location="device:0",device="0"} 0
# HELP memd_uid_bytes Bytes of live buffers each uid owns, by location (what max_uid_bytes counts); uids without buffers are absent.
# TYPE memd_uid_bytes gauge
memd_uid_bytes{uid="1000",location="host"} 12288
# HELP memd_sessions Connected client sessions.
# TYPE memd_sessions gauge
memd_sessions 1
# HELP memd_leases Leases held by clients.
# TYPE memd_leases gauge
memd_leases 3
# HELP memd_device_memory_bytes Each GPU's memory by kind: total, free (as its driver reports), memd (what memd's pool holds there), outside_memd (used but not memd's: other processes, drivers' contexts, and memory memd gave back that clients' imports still hold). free and outside_memd only where the driver reports free memory.
# TYPE memd_device_memory_bytes gauge
# HELP memd_build_info Always 1; the labels say the build.
# TYPE memd_build_info gauge
memd_build_info{version="1.2.3",backend="fake"} 1
# HELP memd_transfer_bytes_total Bytes moved by the transfer engine, by direction (h2h, h2d, d2h, d2d) and device ("host" for host to host).
# TYPE memd_transfer_bytes_total counter
# HELP memd_transfers_total Transfers finished successfully, by direction and device.
# TYPE memd_transfers_total counter
# HELP memd_transfer_paths_total Transfers started, by data path: cpu (host to host), staged (pageable host memory through the pinned ring), direct (pinned host memory, no staging), device (one GPU), peer_staged (between GPUs through the ring).
# TYPE memd_transfer_paths_total counter
memd_transfer_paths_total{path="cpu"} 0
memd_transfer_paths_total{path="staged"} 0
memd_transfer_paths_total{path="direct"} 0
memd_transfer_paths_total{path="device"} 0
memd_transfer_paths_total{path="peer_staged"} 0
# HELP memd_transfer_failures_total Transfers that ended without finishing, by reason (cancelled, deadline, stall, driver, device_unhealthy, session_ended, destination_freed).
# TYPE memd_transfer_failures_total counter
memd_transfer_failures_total{reason="cancelled"} 0
memd_transfer_failures_total{reason="deadline"} 0
memd_transfer_failures_total{reason="destination_freed"} 0
memd_transfer_failures_total{reason="device_unhealthy"} 0
memd_transfer_failures_total{reason="driver"} 0
memd_transfer_failures_total{reason="session_ended"} 0
memd_transfer_failures_total{reason="stall"} 0
# HELP memd_transfer_retries_total Chunks tried again after a transient driver error.
# TYPE memd_transfer_retries_total counter
memd_transfer_retries_total 0
# HELP memd_transfer_admission_rejections_total Copies refused because a session's, a uid's or the daemon's bytes or transfers in flight were at their limit.
# TYPE memd_transfer_admission_rejections_total counter
memd_transfer_admission_rejections_total 0
# HELP memd_transfers_active Transfers queued or running.
# TYPE memd_transfers_active gauge
memd_transfers_active 0
# HELP memd_transfer_active_bytes Bytes of the transfers queued or running (what admission bounds).
# TYPE memd_transfer_active_bytes gauge
memd_transfer_active_bytes 0
# HELP memd_transfer_queued Transfers waiting for their first chunk, by priority.
# TYPE memd_transfer_queued gauge
# HELP memd_transfer_queue_wait_seconds_total Time transfers waited for their first chunk, summed, by priority (divide by memd_transfer_started_total for the mean).
# TYPE memd_transfer_queue_wait_seconds_total counter
# HELP memd_transfer_started_total Transfers that got their first chunk, by priority.
# TYPE memd_transfer_started_total counter
# HELP memd_transfer_staging_seconds_total CPU time spent filling and draining pinned staging slots, by device: compare with memd_transfer_dma_seconds_total to see which stage limits.
# TYPE memd_transfer_staging_seconds_total counter
# HELP memd_transfer_dma_seconds_total Time some DMA of the device's copies was running, by device.
# TYPE memd_transfer_dma_seconds_total counter
# HELP memd_transfer_staging_slots Pinned staging slots in the device's ring.
# TYPE memd_transfer_staging_slots gauge
# HELP memd_transfer_staging_slots_in_use Staging slots holding a chunk now.
# TYPE memd_transfer_staging_slots_in_use gauge
# HELP memd_device_healthy 1 while the GPU's context works for memd; 0 after a sticky driver error (its transfers fail until memd restarts).
# TYPE memd_device_healthy gauge
# HELP memd_generation This memd's generation: 1 when it started from nothing, one more than the memd whose buffers it took back otherwise.
# TYPE memd_generation gauge
memd_generation 1
# HELP memd_recovery_timestamp_seconds When this memd took back the buffers of the memd before it (Unix time); 0 when it started from nothing.
# TYPE memd_recovery_timestamp_seconds gauge
memd_recovery_timestamp_seconds 0
# HELP memd_recovery_duration_seconds How long taking back the previous memd's buffers took.
# TYPE memd_recovery_duration_seconds gauge
memd_recovery_duration_seconds 0
# HELP memd_recovery_adopted_segments Pool segments this memd took back at its start.
# TYPE memd_recovery_adopted_segments gauge
memd_recovery_adopted_segments 0
# HELP memd_recovery_adopted_buffers Buffers this memd took back at its start.
# TYPE memd_recovery_adopted_buffers gauge
memd_recovery_adopted_buffers 0
# HELP memd_recovery_adopted_bytes Bytes of the buffers this memd took back at its start (as the pools count them).
# TYPE memd_recovery_adopted_bytes gauge
memd_recovery_adopted_bytes 0
# HELP memd_recovery_lost_buffers Buffers the previous memd recorded whose memory did not come back (the log says why).
# TYPE memd_recovery_lost_buffers gauge
memd_recovery_lost_buffers 0
# HELP memd_recovery_lost_segments Segments the previous memd stored that did not come back: every one when its state could not be read (the log says why).
# TYPE memd_recovery_lost_segments gauge
memd_recovery_lost_segments 0
# HELP memd_durability_recording 1 while memd records its state, so that its buffers outlive it; 0 when they will not (durability off, no descriptor store: the log says why).
# TYPE memd_durability_recording gauge
memd_durability_recording 0
# HELP memd_leaks What looks forgotten, every uid's, by kind: never_opened (persistent sealed buffers nobody opened in an hour since their creation), unsealed_idle (buffers still not sealed an hour after it), idle_lease (leases held over an hour), many_leases (sessions holding 1024 leases or more). memctl leaks lists them.
# TYPE memd_leaks gauge
memd_leaks{kind="never_opened"} 0
memd_leaks{kind="unsealed_idle"} 0
memd_leaks{kind="idle_lease"} 0
memd_leaks{kind="many_leases"} 0
# HELP memd_leak_bytes Bytes of what memd_leaks counts, by kind (buffers as the pools count them, every copy; leases the memory they map; many_leases 0).
# TYPE memd_leak_bytes gauge
memd_leak_bytes{kind="never_opened"} 0
memd_leak_bytes{kind="unsealed_idle"} 0
memd_leak_bytes{kind="idle_lease"} 0
memd_leak_bytes{kind="many_leases"} 0
)";

// Dashboards, alerts and the Prometheus end-to-end test read these names,
// help texts, labels and values: a change here is a change for operators.
TEST_F(DaemonCollectableTest, ScrapeShowsEveryFamilyAsOperatorsKnowIt) {
  Populate();
  DaemonCollectable collectable(pools_, *broker_, nullptr, "1.2.3", "fake");
  EXPECT_EQ(Scrape(collectable), kGolden);
}

// The leak totals come from the broker at scrape time, every uid's, by the
// report's default rules: nothing counts before an hour has passed.
TEST_F(DaemonCollectableTest, ScrapeCountsWhatLooksForgottenOnceAnHourOld) {
  Populate();
  DaemonCollectable collectable(pools_, *broker_, nullptr, "1.2.3", "fake");
  EXPECT_THAT(Scrape(collectable), HasSubstr("memd_leaks{kind=\"idle_lease\"} 0\n"));
  clock_.Advance(absl::Hours(1));
  const std::string scrape = Scrape(collectable);
  // "sealed" nobody opened; "writing" and "third" unsealed; three leases.
  for (const char* line :
       {"memd_leaks{kind=\"never_opened\"} 1\n", "memd_leak_bytes{kind=\"never_opened\"} 4096\n",
        "memd_leaks{kind=\"unsealed_idle\"} 2\n", "memd_leak_bytes{kind=\"unsealed_idle\"} 8192\n",
        "memd_leaks{kind=\"idle_lease\"} 3\n", "memd_leak_bytes{kind=\"idle_lease\"} 12288\n",
        "memd_leaks{kind=\"many_leases\"} 0\n"}) {
    EXPECT_THAT(scrape, HasSubstr(line));
  }
}

// A pool's figures move between any two reads; a scrape that read a pool
// twice could show one state in one family and another in the next.
TEST_F(DaemonCollectableTest, OneScrapeReadsEachPoolOnce) {
  DaemonCollectable collectable(pools_, *broker_, nullptr, "1.2.3", "fake");
  collectable.Collect();
  EXPECT_EQ(host_->stats_calls(), 1);
  EXPECT_EQ(device_->stats_calls(), 1);
}

TEST_F(DaemonCollectableTest, FiguresOfOneScrapeComeFromOneRead) {
  host_->set_on_stats([](pool::PoolStats& stats) {
    stats.reserved_bytes += 2 * kMiB;
    stats.used_bytes += kMiB;
  });
  DaemonCollectable collectable(pools_, *broker_, nullptr, "1.2.3", "fake");
  const std::string scrape = Scrape(collectable);
  // HostStats() plus one move: 10 MiB reserved, 4 MiB used, 6 MiB free.
  EXPECT_THAT(scrape, HasSubstr("memd_pool_reserved_bytes{location=\"host\"} 10485760\n"));
  EXPECT_THAT(scrape, HasSubstr("memd_pool_used_bytes{location=\"host\"} 4194304\n"));
  EXPECT_THAT(scrape, HasSubstr("memd_pool_free_bytes{location=\"host\"} 6291456\n"));
}

// What recovery found is fixed at start and shows in every scrape.
TEST_F(DaemonCollectableTest, ScrapeShowsWhatTheStartTookBack) {
  durable::DurabilityStatus durability;
  durability.recording = true;
  durability.recovery.generation = 3;
  durability.recovery.recovered = true;
  durability.recovery.when = absl::FromUnixSeconds(1700000000);
  durability.recovery.took = absl::Milliseconds(2500);
  durability.recovery.segments = 2;
  durability.recovery.buffers = 4;
  durability.recovery.bytes = 7 * kMiB;
  durability.recovery.lost_buffers = 1;
  durability.recovery.lost_segments = 2;
  DaemonCollectable collectable(pools_, *broker_, nullptr, "1.2.3", "fake", durability);
  const std::string scrape = Scrape(collectable);
  EXPECT_THAT(scrape, HasSubstr("\nmemd_generation 3\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_timestamp_seconds 1700000000\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_duration_seconds 2.5\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_adopted_segments 2\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_adopted_buffers 4\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_adopted_bytes 7340032\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_lost_buffers 1\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_recovery_lost_segments 2\n"));
  EXPECT_THAT(scrape, HasSubstr("\nmemd_durability_recording 1\n"));
}

// The engine's figures come from the engine the daemon runs: a host-to-host
// copy through a real (host-only) engine shows in the next scrape.
TEST_F(DaemonCollectableTest, ScrapeShowsTheEnginesCopies) {
  auto engine = transfer::Engine::Start({}, transfer::EngineOptions{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::byte> from(4096, std::byte{7}), to(4096);
  transfer::TransferSpec spec;
  spec.session = 1;
  spec.source.memory.host = from.data();
  spec.source.length = from.size();
  spec.source.buffer_id = 1;
  spec.destination.memory.host = to.data();
  spec.destination.length = to.size();
  spec.destination.buffer_id = 2;
  auto id = (*engine)->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  absl::Notification done;
  ASSERT_TRUE((*engine)->Watch(1, *id, [&](const transfer::TransferProgress&) {
    done.Notify();
  }).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  DaemonCollectable collectable(pools_, *broker_, engine->get(), "1.2.3", "fake");
  const std::string scrape = Scrape(collectable);
  EXPECT_THAT(scrape,
              HasSubstr("memd_transfer_bytes_total{direction=\"h2h\",device=\"host\"} 4096\n"));
  EXPECT_THAT(scrape, HasSubstr("memd_transfers_total{direction=\"h2h\",device=\"host\"} 1\n"));
  EXPECT_THAT(scrape, HasSubstr("memd_transfer_paths_total{path=\"cpu\"} 1\n"));
  EXPECT_THAT(scrape, HasSubstr("memd_transfer_started_total{priority=\"normal\"} 1\n"));
  EXPECT_EQ(to, from);
}

}  // namespace
}  // namespace memd::metrics
