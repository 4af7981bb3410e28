#include "daemon/metrics/durability_families.h"

#include <cstdint>

#include "absl/time/time.h"

namespace memd::metrics {
namespace {

using durable::RecoveryReport;
constexpr prometheus::MetricType kGauge = prometheus::MetricType::Gauge;

double Number(std::uint64_t value) { return static_cast<double>(value); }

// A family with one unlabelled sample read from this start's recovery.
FamilySpec::Reader Recovery(double (*value)(const RecoveryReport&)) {
  return [value](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    out.push_back({{}, value(snapshot.durability.recovery)});
  };
}

}  // namespace

std::vector<FamilySpec> DurabilityFamilies() {
  return {
      {"memd_generation",
       "This memd's generation: 1 when it started from nothing, one more than the memd "
       "whose buffers it took back otherwise.",
       kGauge, Recovery([](const RecoveryReport& r) { return Number(r.generation); })},
      {"memd_recovery_timestamp_seconds",
       "When this memd took back the buffers of the memd before it (Unix time); 0 when it "
       "started from nothing.",
       kGauge,
       Recovery([](const RecoveryReport& r) {
         return r.recovered ? absl::ToDoubleSeconds(r.when - absl::UnixEpoch()) : 0.0;
       })},
      {"memd_recovery_duration_seconds", "How long taking back the previous memd's buffers took.",
       kGauge, Recovery([](const RecoveryReport& r) { return absl::ToDoubleSeconds(r.took); })},
      {"memd_recovery_adopted_segments", "Pool segments this memd took back at its start.",
       kGauge, Recovery([](const RecoveryReport& r) { return Number(r.segments); })},
      {"memd_recovery_adopted_buffers", "Buffers this memd took back at its start.", kGauge,
       Recovery([](const RecoveryReport& r) { return Number(r.buffers); })},
      {"memd_recovery_adopted_bytes",
       "Bytes of the buffers this memd took back at its start (as the pools count them).",
       kGauge, Recovery([](const RecoveryReport& r) { return Number(r.bytes); })},
      {"memd_recovery_lost_buffers",
       "Buffers the previous memd recorded whose memory did not come back (the log says "
       "why).",
       kGauge, Recovery([](const RecoveryReport& r) { return Number(r.lost_buffers); })},
      {"memd_recovery_lost_segments",
       "Segments the previous memd stored that did not come back: every one when its state "
       "could not be read (the log says why).",
       kGauge, Recovery([](const RecoveryReport& r) { return Number(r.lost_segments); })},
      {"memd_durability_recording",
       "1 while memd records its state, so that its buffers outlive it; 0 when they will "
       "not (durability off, no descriptor store: the log says why).",
       kGauge,
       [](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
         out.push_back({{}, snapshot.durability.recording ? 1.0 : 0.0});
       }},
  };
}

}  // namespace memd::metrics
