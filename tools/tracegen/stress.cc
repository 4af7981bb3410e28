// The stress workload (workloads.h).

#include <cstdint>
#include <vector>

#include "tools/tracegen/random.h"
#include "tools/tracegen/workloads.h"

namespace memd::tracegen {

void GenerateStress(const StressOptions& options, TraceBuilder& trace) {
  Random random(options.seed);
  std::vector<std::uint64_t> live;
  while (trace.events() < options.events) {
    // Allocates with probability target / (target + live): even odds at the
    // target, so the live count drifts back towards it.
    if (random.Chance(options.live, options.live + live.size())) {
      live.push_back(trace.Allocate(random.LogUniform(options.min_bytes, options.max_bytes)));
    } else {
      const std::uint64_t victim = random.Below(live.size());
      trace.Free(live[victim]);
      live[victim] = live.back();
      live.pop_back();
    }
  }
  for (std::uint64_t id : live) trace.Free(id);
}

}  // namespace memd::tracegen
