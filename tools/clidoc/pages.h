#pragma once

// memd's, memctl's and the trace tools' manual pages: the prose that is not in their command
// lines (clidoc::Page), beside the App each program parses.

#include <memory>

#include "CLI/CLI.hpp"
#include "tools/clidoc/clidoc.h"

namespace memd::clidoc {

// A program's command line and the rest of its manual page.
struct Program {
  std::unique_ptr<CLI::App> app;
  Page page;
};

Program Memd();    // memd(8): memd::MakeCommandLineApp (daemon/config.h).
Program Memctl();  // memctl(1): memctl::MakeCommandLineApp (tools/memctl/cli.h).
// memd-replay(1) and memd-tracegen(1): their MakeCommandLineApp
// (tools/replay/cli.h, tools/tracegen/cli.h).
Program MemdReplay();
Program MemdTracegen();

}  // namespace memd::clidoc
