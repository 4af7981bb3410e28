// memd-tracegen: writes a synthetic allocation trace (training, inference
// or stress; workloads.h) to stdout, the same bytes for the same options.

#include <signal.h>
#include <unistd.h>

#include <exception>
#include <iostream>
#include <new>
#include <optional>

#include "daemon/pool/trace_format.h"
#include "tools/tracegen/cli.h"
#include "tools/tracegen/trace_builder.h"
#include "tools/tracegen/workloads.h"

namespace memd::tracegen {
namespace {

int Run(const Invocation& invocation) {
  pool::TraceWriter writer(STDOUT_FILENO, "stdout");
  TraceBuilder trace(writer);
  switch (invocation.workload) {
    case Workload::kTraining: GenerateTraining(invocation.training, trace); break;
    case Workload::kInference: GenerateInference(invocation.inference, trace); break;
    case Workload::kStress: GenerateStress(invocation.stress, trace); break;
  }
  if (absl::Status status = writer.Flush(); !status.ok()) {
    std::cerr << "memd-tracegen: " << status.message() << '\n';
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace
}  // namespace memd::tracegen

int main(int argc, char** argv) {
  using namespace memd::tracegen;
  // A closed pipe (memd-tracegen ... | head) is a write error to report.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Invocation invocation;
    if (std::optional<int> exit_code = ParseCommandLine(argc, argv, invocation, std::cout, std::cerr)) {
      return *exit_code;
    }
    return Run(invocation);
  } catch (const std::bad_alloc&) {
    std::cerr << "memd-tracegen: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "memd-tracegen: internal error: " << e.what() << '\n';
  }
  return kExitFailed;
}
