#include "daemon/metrics/transfer_families.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using transfer::DataPath;
using transfer::Direction;
using transfer::Priority;

using LabelList = std::vector<std::pair<std::string, std::string>>;

// "labels=value" per sample of the family, from `snapshot`.
std::vector<std::pair<LabelList, double>> Read(std::string_view name,
                                               const DaemonSnapshot& snapshot) {
  for (const FamilySpec& spec : TransferFamilies()) {
    if (spec.name != name) continue;
    std::vector<Sample> samples;
    spec.read(snapshot, samples);
    std::vector<std::pair<LabelList, double>> read;
    for (const Sample& sample : samples) {
      LabelList labels;
      for (const auto& label : sample.labels) labels.emplace_back(label.name, label.value);
      read.emplace_back(std::move(labels), sample.value);
    }
    return read;
  }
  ADD_FAILURE() << "no family " << name;
  return {};
}

DaemonSnapshot Busy() {
  DaemonSnapshot snapshot;
  transfer::EngineStats& stats = snapshot.transfers;
  stats.flows = {{Direction::kHostToDevice, 0, 3 << 20, 2},
                 {Direction::kHostToHost, -1, 4096, 1}};
  stats.priorities = {{Priority::kCritical, 1, 4, 0.5},
                      {Priority::kNormal, 0, 9, 2.0},
                      {Priority::kBackground, 2, 1, 7.0}};
  transfer::DeviceStats device;
  device.device = 0;
  device.health = absl::InternalError("cuMemcpyHtoDAsync_v2 failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  device.slots = 4;
  device.slots_in_use = 3;
  device.staging_seconds = 1.5;
  device.dma_seconds = 2.5;
  stats.devices = {device};
  stats.paths = {{DataPath::kStaged, 5}};
  stats.failures = {{transfer::FailureReason::kDeadline, 2}};
  stats.retries = 6;
  stats.active_transfers = 3;
  stats.active_bytes = 1 << 30;
  stats.admission_rejections = 8;
  return snapshot;
}

TEST(TransferFamiliesTest, FlowsAreLabelledByDirectionAndDeviceWithHostForCpuCopies) {
  EXPECT_THAT(Read("memd_transfer_bytes_total", Busy()),
              ElementsAre(Pair(LabelList{{"direction", "h2d"}, {"device", "0"}}, 3 << 20),
                          Pair(LabelList{{"direction", "h2h"}, {"device", "host"}}, 4096)));
  EXPECT_THAT(Read("memd_transfers_total", Busy()),
              ElementsAre(Pair(LabelList{{"direction", "h2d"}, {"device", "0"}}, 2),
                          Pair(LabelList{{"direction", "h2h"}, {"device", "host"}}, 1)));
}

TEST(TransferFamiliesTest, EveryPathAndFailureReasonHasASeriesBeforeItsFirstEvent) {
  EXPECT_THAT(Read("memd_transfer_paths_total", DaemonSnapshot{}),
              ElementsAre(Pair(LabelList{{"path", "cpu"}}, 0),
                          Pair(LabelList{{"path", "staged"}}, 0),
                          Pair(LabelList{{"path", "direct"}}, 0),
                          Pair(LabelList{{"path", "device"}}, 0),
                          Pair(LabelList{{"path", "peer_staged"}}, 0)));
  auto failures = Read("memd_transfer_failures_total", DaemonSnapshot{});
  EXPECT_EQ(failures.size(), 7u);
  for (const auto& [labels, value] : failures) EXPECT_EQ(value, 0);
  EXPECT_THAT(Read("memd_transfer_paths_total", Busy())[1],
              Pair(LabelList{{"path", "staged"}}, 5));
  EXPECT_THAT(Read("memd_transfer_failures_total", Busy()),
              testing::Contains(Pair(LabelList{{"reason", "deadline"}}, 2)));
}

TEST(TransferFamiliesTest, QueuesAreShownPerPriority) {
  EXPECT_THAT(Read("memd_transfer_queued", Busy()),
              ElementsAre(Pair(LabelList{{"priority", "critical"}}, 1),
                          Pair(LabelList{{"priority", "normal"}}, 0),
                          Pair(LabelList{{"priority", "background"}}, 2)));
  EXPECT_THAT(Read("memd_transfer_queue_wait_seconds_total", Busy())[2],
              Pair(LabelList{{"priority", "background"}}, 7.0));
  EXPECT_THAT(Read("memd_transfer_started_total", Busy())[1],
              Pair(LabelList{{"priority", "normal"}}, 9));
}

TEST(TransferFamiliesTest, DevicesShowStagesRingAndHealth) {
  const LabelList zero = {{"device", "0"}};
  EXPECT_THAT(Read("memd_transfer_staging_seconds_total", Busy()),
              ElementsAre(Pair(zero, 1.5)));
  EXPECT_THAT(Read("memd_transfer_dma_seconds_total", Busy()), ElementsAre(Pair(zero, 2.5)));
  EXPECT_THAT(Read("memd_transfer_staging_slots", Busy()), ElementsAre(Pair(zero, 4)));
  EXPECT_THAT(Read("memd_transfer_staging_slots_in_use", Busy()), ElementsAre(Pair(zero, 3)));
  EXPECT_THAT(Read("memd_device_healthy", Busy()), ElementsAre(Pair(zero, 0)));
  DaemonSnapshot healthy = Busy();
  healthy.transfers.devices[0].health = absl::OkStatus();
  EXPECT_THAT(Read("memd_device_healthy", healthy), ElementsAre(Pair(zero, 1)));
}

TEST(TransferFamiliesTest, EngineLevelsAndCountersAreSingleSeries) {
  EXPECT_THAT(Read("memd_transfer_retries_total", Busy()), ElementsAre(Pair(LabelList{}, 6)));
  EXPECT_THAT(Read("memd_transfer_admission_rejections_total", Busy()),
              ElementsAre(Pair(LabelList{}, 8)));
  EXPECT_THAT(Read("memd_transfers_active", Busy()), ElementsAre(Pair(LabelList{}, 3)));
  EXPECT_THAT(Read("memd_transfer_active_bytes", Busy()),
              ElementsAre(Pair(LabelList{}, 1 << 30)));
}

}  // namespace
}  // namespace memd::metrics
