// memd-replay: replays an allocation trace against one pool policy over a
// simulated device and prints what it measured as one JSON object
// (report.h lists the fields).

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/bytes.h"
#include "tools/replay/cli.h"
#include "tools/replay/policy.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/simulated_backend.h"

namespace memd::replay {
namespace {

// Failures with the exit code they deserve.
struct Failure {
  int exit_code;
  std::string message;
};

// The capacity at which the trace's peak live bytes fill `occupancy` of
// the device, rounded up to the alignment.
std::uint64_t CapacityForOccupancy(std::uint64_t peak_live_bytes, double occupancy,
                                   std::uint64_t alignment) {
  const long double capacity =
      std::ceil(static_cast<long double>(peak_live_bytes) / occupancy);
  if (capacity >= 18446744073709551615.0L) return ~std::uint64_t{0};
  const std::uint64_t aligned =
      AlignUp(std::max<std::uint64_t>(static_cast<std::uint64_t>(capacity), 1), alignment);
  return aligned == 0 ? ~std::uint64_t{0} : aligned;
}

std::optional<Failure> Run(Invocation invocation) {
  std::ifstream trace(invocation.trace, std::ios::binary);
  if (!trace.is_open()) {
    return Failure{kExitFailed, absl::StrCat("cannot open trace ", invocation.trace, ": ",
                                             std::strerror(errno))};
  }
  // First pass: check the whole trace and learn its size before any pool
  // runs; the replay needs the allocation count for the warm-up.
  absl::StatusOr<TraceSummary> summary = SummarizeTrace(trace);
  if (!summary.ok()) {
    return Failure{kExitFailed,
                   absl::StrCat(invocation.trace, ": ", summary.status().message())};
  }
  trace.clear();
  if (!trace.seekg(0)) {
    return Failure{kExitFailed, absl::StrCat(invocation.trace,
                                             ": cannot read the trace twice (not a "
                                             "regular file?)")};
  }
  if (invocation.occupancy.has_value()) {
    invocation.capacity_bytes = CapacityForOccupancy(
        summary->peak_live_bytes, *invocation.occupancy, invocation.alignment);
  }

  SimulatedBackend backend(SimulatedBackendOptions{invocation.alignment,
                                                   invocation.capacity_bytes});
  std::unique_ptr<pool::Pool> pool = MakePool(invocation.policy, backend,
                                              SimulatedBackend::location(),
                                              invocation.capacity_bytes);
  const auto warmup_allocations = static_cast<std::uint64_t>(
      std::floor(invocation.warmup_fraction * static_cast<double>(summary->allocations)));
  absl::StatusOr<ReplayResult> result =
      Replay(trace, *pool, backend, warmup_allocations, invocation.stats_every);
  pool.reset();
  if (!result.ok()) {
    return Failure{kExitFailed,
                   absl::StrCat(invocation.trace, ": ", result.status().message())};
  }
  ReportContext context{invocation.policy, invocation.trace, invocation.capacity_bytes,
                        invocation.alignment, invocation.warmup_fraction,
                        invocation.stats_every};
  std::cout << MakeReport(context, *result).dump(2) << '\n';
  std::cout.flush();
  if (!std::cout) return Failure{kExitFailed, "cannot write the report to stdout"};
  return std::nullopt;
}

}  // namespace
}  // namespace memd::replay

int main(int argc, char** argv) {
  using namespace memd::replay;
  // As memd does (daemon/main.cc): Debian's Abseil checks every lock for
  // deadlocks otherwise, which would dominate mean_alloc_ns.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  try {
    Invocation invocation;
    if (std::optional<int> exit_code =
            ParseCommandLine(argc, argv, invocation, std::cout, std::cerr)) {
      return *exit_code;
    }
    if (std::optional<Failure> failure = Run(std::move(invocation))) {
      std::cerr << "memd-replay: " << failure->message << '\n';
      return failure->exit_code;
    }
    return kExitOk;
  } catch (const std::bad_alloc&) {
    std::cerr << "memd-replay: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "memd-replay: internal error: " << e.what() << '\n';
  }
  return kExitFailed;
}
