#pragma once

// memd-replay's command line (CLI11), checked completely before any trace
// is read, so a bad command line exits 2 and touches nothing.

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "tools/replay/policy.h"

namespace memd::replay {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // A bad trace, or an I/O error.
inline constexpr int kExitUsage = 2;   // The command line was wrong.

struct Invocation {
  std::string trace;
  Policy policy = Policy::kMemd;
  // Unlimited unless --capacity or --occupancy.
  std::uint64_t capacity_bytes = std::numeric_limits<std::uint64_t>::max();
  // --occupancy: the capacity is the trace's peak live bytes divided by it.
  std::optional<double> occupancy;
  std::uint64_t alignment = 4096;
  double warmup_fraction = 0.1;
  // Take Pool::Stats() (for max_fragmentation) after every Nth event.
  std::uint64_t stats_every = 1;
};

// Parses argv into `invocation`. Returns an exit code when memd-replay
// should stop: kExitOk after --help/--version on `out`, kExitUsage after a
// usage error on `err`.
std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err);

// memd-replay's command line as ParseCommandLine declares it, with what its
// options fill, never parsed: what tools/clidoc walks for its man page and
// shell completions.
std::unique_ptr<CLI::App> MakeCommandLineApp();

}  // namespace memd::replay
