#include "daemon/metrics/leak_families.h"

#include <cstdint>
#include <string>

#include "daemon/broker/leaks.h"

namespace memd::metrics {
namespace {

// One sample per kind, in the report's order, from the snapshot's totals.
FamilySpec::Reader EachKind(std::uint64_t broker::LeakTotal::*figure) {
  return [figure](const DaemonSnapshot& snapshot, std::vector<Sample>& out) {
    for (std::string_view kind : broker::kLeakKinds) {
      std::uint64_t value = 0;
      for (const broker::LeakTotal& total : snapshot.leaks) {
        if (total.kind == kind) value = total.*figure;
      }
      out.push_back({{{"kind", std::string(kind)}}, static_cast<double>(value)});
    }
  };
}

}  // namespace

std::vector<FamilySpec> LeakFamilies() {
  constexpr prometheus::MetricType kGauge = prometheus::MetricType::Gauge;
  return {
      {"memd_leaks",
       "What looks forgotten, every uid's, by kind: never_opened (persistent sealed buffers "
       "nobody opened in an hour since their creation), unsealed_idle (buffers still not "
       "sealed an hour after it), idle_lease (leases held over an hour), many_leases "
       "(sessions holding 1024 leases or more). memctl leaks lists them.",
       kGauge, EachKind(&broker::LeakTotal::count)},
      {"memd_leak_bytes",
       "Bytes of what memd_leaks counts, by kind (buffers as the pools count them, every "
       "copy; leases the memory they map; many_leases 0).",
       kGauge, EachKind(&broker::LeakTotal::bytes)},
  };
}

}  // namespace memd::metrics
