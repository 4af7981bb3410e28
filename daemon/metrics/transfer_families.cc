#include "daemon/metrics/transfer_families.h"

#include <string>

#include "daemon/transfer/types.h"

namespace memd::metrics {
namespace {

using Labels = std::vector<prometheus::ClientMetric::Label>;
using transfer::DeviceStats;
using transfer::EngineStats;
using transfer::FlowStats;
using transfer::PriorityStats;
constexpr prometheus::MetricType kGauge = prometheus::MetricType::Gauge;
constexpr prometheus::MetricType kCounter = prometheus::MetricType::Counter;

double Number(std::uint64_t value) { return static_cast<double>(value); }

// {direction, device}: device is "host" for host-to-host copies, as no GPU
// moves those.
Labels FlowLabels(const FlowStats& flow) {
  return {{"direction", std::string(transfer::DirectionName(flow.direction))},
          {"device", flow.device < 0 ? "host" : std::to_string(flow.device)}};
}

template <typename Value>
FamilySpec::Reader EachFlow(Value value) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const FlowStats& flow : snapshot.transfers.flows) {
      out.push_back({FlowLabels(flow), value(flow)});
    }
  };
}

template <typename Value>
FamilySpec::Reader EachDevice(Value value) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const DeviceStats& device : snapshot.transfers.devices) {
      out.push_back({{{"device", std::to_string(device.device)}}, value(device)});
    }
  };
}

template <typename Value>
FamilySpec::Reader EachPriority(Value value) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (const PriorityStats& priority : snapshot.transfers.priorities) {
      out.push_back({{{"priority", std::string(transfer::PriorityName(priority.priority))}},
                     value(priority)});
    }
  };
}

template <typename Value>
FamilySpec::Reader Single(Value value) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    out.push_back({{}, value(snapshot.transfers)});
  };
}

// Every data path and every reason from the start, at 0, so that rate()
// and alerts see the series before the first event.
void Paths(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  using transfer::DataPath;
  for (DataPath path : {DataPath::kCpu, DataPath::kStaged, DataPath::kDirect,
                        DataPath::kDevice, DataPath::kPeerStaged}) {
    auto found = snapshot.transfers.paths.find(path);
    out.push_back({{{"path", std::string(transfer::DataPathName(path))}},
                   Number(found == snapshot.transfers.paths.end() ? 0 : found->second)});
  }
}

void Failures(const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
  using transfer::FailureReason;
  // By name: the series come out in the order they always had.
  std::map<std::string, std::uint64_t> failures;
  for (FailureReason reason :
       {FailureReason::kCancelled, FailureReason::kDeadline, FailureReason::kStall,
        FailureReason::kDriver, FailureReason::kDeviceUnhealthy, FailureReason::kSessionEnded,
        FailureReason::kDestinationFreed}) {
    failures.try_emplace(std::string(transfer::FailureReasonName(reason)), 0);
  }
  for (const auto& [reason, count] : snapshot.transfers.failures) {
    failures[std::string(transfer::FailureReasonName(reason))] += count;
  }
  for (const auto& [reason, count] : failures) {
    out.push_back({{{"reason", reason}}, Number(count)});
  }
}

}  // namespace

// A flat table, like DaemonFamilies.
std::vector<FamilySpec> TransferFamilies() {
  return {
      {"memd_transfer_bytes_total",
       "Bytes moved by the transfer engine, by direction (h2h, h2d, d2h, d2d) and device "
       "(\"host\" for host to host).",
       kCounter, EachFlow([](const FlowStats& f) { return Number(f.bytes); })},
      {"memd_transfers_total", "Transfers finished successfully, by direction and device.",
       kCounter, EachFlow([](const FlowStats& f) { return Number(f.transfers); })},
      {"memd_transfer_paths_total",
       "Transfers started, by data path: cpu (host to host), staged (pageable host memory "
       "through the pinned ring), direct (pinned host memory, no staging), device (one GPU), "
       "peer_staged (between GPUs through the ring).",
       kCounter, Paths},
      {"memd_transfer_failures_total",
       "Transfers that ended without finishing, by reason (cancelled, deadline, stall, "
       "driver, device_unhealthy, session_ended, destination_freed).",
       kCounter, Failures},
      {"memd_transfer_retries_total", "Chunks tried again after a transient driver error.",
       kCounter, Single([](const EngineStats& s) { return Number(s.retries); })},
      {"memd_transfer_admission_rejections_total",
       "Copies refused because a session's, a uid's or the daemon's bytes or transfers in "
       "flight were at their limit.",
       kCounter,
       Single([](const EngineStats& s) { return Number(s.admission_rejections); })},
      {"memd_transfers_active", "Transfers queued or running.", kGauge,
       Single([](const EngineStats& s) { return Number(s.active_transfers); })},
      {"memd_transfer_active_bytes",
       "Bytes of the transfers queued or running (what admission bounds).", kGauge,
       Single([](const EngineStats& s) { return Number(s.active_bytes); })},
      {"memd_transfer_queued", "Transfers waiting for their first chunk, by priority.",
       kGauge, EachPriority([](const PriorityStats& p) { return Number(p.queued); })},
      {"memd_transfer_queue_wait_seconds_total",
       "Time transfers waited for their first chunk, summed, by priority (divide by "
       "memd_transfer_started_total for the mean).",
       kCounter, EachPriority([](const PriorityStats& p) { return p.wait_seconds; })},
      {"memd_transfer_started_total", "Transfers that got their first chunk, by priority.",
       kCounter, EachPriority([](const PriorityStats& p) { return Number(p.started); })},
      {"memd_transfer_staging_seconds_total",
       "CPU time spent filling and draining pinned staging slots, by device: compare with "
       "memd_transfer_dma_seconds_total to see which stage limits.",
       kCounter, EachDevice([](const DeviceStats& d) { return d.staging_seconds; })},
      {"memd_transfer_dma_seconds_total",
       "Time some DMA of the device's copies was running, by device.", kCounter,
       EachDevice([](const DeviceStats& d) { return d.dma_seconds; })},
      {"memd_transfer_staging_slots", "Pinned staging slots in the device's ring.", kGauge,
       EachDevice([](const DeviceStats& d) { return Number(d.slots); })},
      {"memd_transfer_staging_slots_in_use", "Staging slots holding a chunk now.", kGauge,
       EachDevice([](const DeviceStats& d) { return Number(d.slots_in_use); })},
      {"memd_device_healthy",
       "1 while the GPU's context works for memd; 0 after a sticky driver error (its "
       "transfers fail until memd restarts).",
       kGauge, EachDevice([](const DeviceStats& d) { return d.health.ok() ? 1.0 : 0.0; })},
  };
}

}  // namespace memd::metrics
