#pragma once

// memd-tracegen's command line (CLI11), checked completely before a trace
// is written, so a bad command line exits 2 and writes nothing.

#include <memory>
#include <optional>
#include <ostream>

#include "CLI/CLI.hpp"
#include "tools/tracegen/workloads.h"

namespace memd::tracegen {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // stdout could not be written.
inline constexpr int kExitUsage = 2;   // The command line was wrong.

enum class Workload { kTraining, kInference, kStress };

struct Invocation {
  Workload workload = Workload::kTraining;
  TrainingOptions training;
  InferenceOptions inference;
  StressOptions stress;
};

// Parses argv into `invocation`. Returns an exit code when memd-tracegen
// should stop: kExitOk after --help/--version on `out`, kExitUsage after a
// usage error on `err`.
std::optional<int> ParseCommandLine(int argc, const char* const* argv, Invocation& invocation,
                                    std::ostream& out, std::ostream& err);

// memd-tracegen's command line as ParseCommandLine declares it, with what
// its options fill, never parsed: what tools/clidoc walks for its man page
// and shell completions.
std::unique_ptr<CLI::App> MakeCommandLineApp();

}  // namespace memd::tracegen
