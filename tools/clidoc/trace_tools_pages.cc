#include "common/version.h"
#include "tools/clidoc/pages.h"
#include "tools/replay/cli.h"
#include "tools/tracegen/cli.h"

namespace memd::clidoc {

Program MemdReplay() {
  Program replay{.app = replay::MakeCommandLineApp(), .page = {}};
  Page& page = replay.page;
  page.section = "1";
  page.source = std::string("memd ") + kVersion;
  page.summary = "replay an allocation trace against memd's pool and two baselines";
  page.description = {
      "memd-replay feeds an allocation trace (op,id,bytes CSV, as memd-tracegen(1) "
      "writes) to one pool policy over a simulated device that holds no memory, and "
      "prints what it measured as one JSON object: the pool's hit rate, allocations "
      "refused (and those refused with room left), peak reserved against peak live "
      "bytes, the largest fragmentation, the mean time of an allocation. It tells how "
      "memd's pool would serve a workload, next to a power-of-two pool (pow2) and none "
      "(exact), without a GPU or a daemon.",
  };
  page.exit_status = {
      {"0", "Replayed (allocations that failed for want of room included)."},
      {"1", "The trace is malformed (memd-replay: TRACE: line N: reason) or unreadable."},
      {"2", "The command line was wrong."},
  };
  page.see_also = {"memd-tracegen(1)", "memd(8)"};
  return replay;
}

Program MemdTracegen() {
  Program tracegen{.app = tracegen::MakeCommandLineApp(), .page = {}};
  Page& page = tracegen.page;
  page.section = "1";
  page.source = std::string("memd ") + kVersion;
  page.summary = "write a synthetic allocation trace for memd-replay";
  page.description = {
      "memd-tracegen writes the allocations and frees of a modelled workload to "
      "stdout as an op,id,bytes CSV: training (a transformer's activations, gradients "
      "and evaluations), inference (requests with their caches coming and going) or "
      "stress (random sizes at a target number of live allocations). The same options "
      "write the same bytes.",
  };
  page.exit_status = {
      {"0", "The trace was written."},
      {"1", "stdout could not be written."},
      {"2", "The command line was wrong."},
  };
  page.see_also = {"memd-replay(1)"};
  return tracegen;
}

}  // namespace memd::clidoc
