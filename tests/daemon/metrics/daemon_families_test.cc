#include "daemon/metrics/daemon_families.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

const FamilySpec& Find(std::string_view name) {
  for (const FamilySpec& spec : DaemonFamilies()) {
    if (spec.name == name) return spec;
  }
  ADD_FAILURE() << "no family " << name;
  static const FamilySpec kNone{};
  return kNone;
}

std::vector<Sample> Read(std::string_view name, const DaemonSnapshot& snapshot) {
  std::vector<Sample> samples;
  const FamilySpec& spec = Find(name);
  if (spec.read) spec.read(snapshot, samples);
  return samples;
}

std::vector<std::pair<std::string, std::string>> LabelsOf(const Sample& sample) {
  std::vector<std::pair<std::string, std::string>> labels;
  for (const auto& label : sample.labels) labels.emplace_back(label.name, label.value);
  return labels;
}

TEST(DaemonFamiliesTest, EveryFamilyFollowsPrometheusNaming) {
  absl::flat_hash_set<std::string_view> names;
  for (const FamilySpec& spec : DaemonFamilies()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(names.insert(spec.name).second) << "declared twice";
    EXPECT_TRUE(spec.name.starts_with("memd_"));
    EXPECT_FALSE(spec.help.empty());
    EXPECT_TRUE(spec.read != nullptr);
    const bool counter = spec.type == prometheus::MetricType::Counter;
    EXPECT_TRUE(counter || spec.type == prometheus::MetricType::Gauge);
    EXPECT_EQ(counter, spec.name.ends_with("_total"));
  }
  EXPECT_EQ(names.size(), 58u);
}

TEST(DaemonFamiliesTest, MemoryWaitsHaveASeriesForEveryPool) {
  DaemonSnapshot snapshot;
  snapshot.pools.resize(2);
  snapshot.pools[0].location = Location::Host();
  snapshot.pools[1].location = Location::Device(0);
  snapshot.counts.memory_waits["device:0"] = {.calls = 3, .bytes = 96};
  std::vector<Sample> creates = Read("memd_memory_waits", snapshot);
  ASSERT_EQ(creates.size(), 2u);
  EXPECT_EQ(creates[0].value, 0.0) << "host: nobody waits, yet a series";
  EXPECT_EQ(creates[1].value, 3.0);
  std::vector<Sample> bytes = Read("memd_memory_wait_bytes", snapshot);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[1].value, 96.0);
  EXPECT_EQ(LabelsOf(bytes[1]),
            (std::vector<std::pair<std::string, std::string>>{{"location", "device:0"},
                                                              {"device", "0"}}));
}

TEST(DaemonFamiliesTest, DeviceMemorySaysFreeAndOutsideOnlyWhereTheDriverReportsFree) {
  DaemonSnapshot snapshot;
  pool::DeviceMemory cuda;
  cuda.ordinal = 0;
  cuda.total_bytes = 100;
  cuda.has_free = true;
  cuda.free_bytes = 60;
  cuda.memd_bytes = 30;
  cuda.outside_memd_bytes = 10;
  pool::DeviceMemory level_zero;
  level_zero.ordinal = 1;
  level_zero.total_bytes = 200;
  level_zero.memd_bytes = 50;
  snapshot.devices = {cuda, level_zero};
  std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, double>> seen;
  for (const Sample& sample : Read("memd_device_memory_bytes", snapshot)) {
    seen.emplace_back(LabelsOf(sample), sample.value);
  }
  using L = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(seen, (std::vector<std::pair<L, double>>{
                      {{{"device", "0"}, {"kind", "total"}}, 100},
                      {{{"device", "0"}, {"kind", "memd"}}, 30},
                      {{{"device", "0"}, {"kind", "free"}}, 60},
                      {{{"device", "0"}, {"kind", "outside_memd"}}, 10},
                      {{{"device", "1"}, {"kind", "total"}}, 200},
                      {{{"device", "1"}, {"kind", "memd"}}, 50},
                  }));
}

TEST(DaemonFamiliesTest, DevicePoolsCarryTheirOrdinalAsALabel) {
  DaemonSnapshot snapshot;
  snapshot.pools.resize(2);
  snapshot.pools[0].location = Location::Host();
  snapshot.pools[1].location = Location::Device(3);
  snapshot.pools[1].used_bytes = 7;
  std::vector<Sample> used = Read("memd_pool_used_bytes", snapshot);
  ASSERT_EQ(used.size(), 2u);
  EXPECT_THAT(LabelsOf(used[0]), ElementsAre(Pair("location", "host")));
  EXPECT_THAT(LabelsOf(used[1]),
              ElementsAre(Pair("location", "device:3"), Pair("device", "3")));
  EXPECT_EQ(used[1].value, 7);
}

TEST(DaemonFamiliesTest, HitRatioIsZeroBeforeAnyAllocation) {
  DaemonSnapshot snapshot;
  snapshot.pools.resize(2);
  snapshot.pools[1].hit_count = 1;
  snapshot.pools[1].miss_count = 3;
  std::vector<Sample> ratio = Read("memd_pool_hit_ratio", snapshot);
  ASSERT_EQ(ratio.size(), 2u);
  EXPECT_EQ(ratio[0].value, 0.0);
  EXPECT_EQ(ratio[1].value, 0.25);
}

TEST(DaemonFamiliesTest, EveryPoolHasQuotaSeriesBeforeAnyRefusal) {
  DaemonSnapshot snapshot;
  snapshot.pools.resize(1);
  snapshot.counts.rejections.quotas[{"max_uid_bytes", "device:0"}] = 4;
  int host_series = 0;
  double device_refusals = 0;
  for (const Sample& sample : Read("memd_quota_rejections_total", snapshot)) {
    auto labels = LabelsOf(sample);
    if (labels.size() == 2 && labels[1] == std::pair<std::string, std::string>{"location", "host"}) {
      ++host_series;
      EXPECT_EQ(sample.value, 0);
    }
    if (labels.size() == 2 && labels[1].second == "device:0") device_refusals = sample.value;
  }
  EXPECT_EQ(host_series, 2);  // max_uid_bytes and max_session_bytes.
  EXPECT_EQ(device_refusals, 4);
}

// An alert on memd_leaks{kind="idle_lease"} needs the series before the
// first leak, and a snapshot that has no totals (no broker yet) shows zeros.
TEST(DaemonFamiliesTest, EveryLeakKindHasASeriesAtZeroWhenNone) {
  DaemonSnapshot snapshot;
  std::vector<Sample> leaks = Read("memd_leaks", snapshot);
  ASSERT_EQ(leaks.size(), 4u);
  EXPECT_THAT(LabelsOf(leaks[2]), ElementsAre(Pair("kind", "idle_lease")));
  EXPECT_EQ(leaks[2].value, 0);
  snapshot.leaks = {{"never_opened", 0, 0}, {"unsealed_idle", 0, 0}, {"idle_lease", 2, 8192},
                    {"many_leases", 1, 0}};
  EXPECT_EQ(Read("memd_leaks", snapshot)[2].value, 2);
  EXPECT_EQ(Read("memd_leak_bytes", snapshot)[2].value, 8192);
  EXPECT_EQ(Read("memd_leaks", snapshot)[3].value, 1);
}

TEST(DaemonFamiliesTest, UidsWithoutBuffersAreAbsent) {
  DaemonSnapshot snapshot;
  EXPECT_TRUE(Read("memd_uid_bytes", snapshot).empty());
  snapshot.usage.push_back({1000, Location::Pinned(), 4096, 1, 0});
  std::vector<Sample> bytes = Read("memd_uid_bytes", snapshot);
  ASSERT_EQ(bytes.size(), 1u);
  EXPECT_THAT(LabelsOf(bytes[0]),
              ElementsAre(Pair("uid", "1000"), Pair("location", "pinned")));
  EXPECT_EQ(bytes[0].value, 4096);
}

}  // namespace
}  // namespace memd::metrics
