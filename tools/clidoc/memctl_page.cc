#include "common/version.h"
#include "tools/clidoc/pages.h"
#include "tools/memctl/cli.h"

namespace memd::clidoc {

Program Memctl() {
  Program memctl{.app = memctl::MakeCommandLineApp(), .page = {}};
  Page& page = memctl.page;
  page.section = "1";
  page.source = std::string("memd ") + kVersion;
  page.summary = "look at and operate the local memd, the per-node memory broker";
  page.description = {
      "memctl talks to the memd(8) of this node over its control socket: it shows the "
      "daemon's pools, buffers, sessions and devices, publishes files as buffers and "
      "copies buffers out, and asks the daemon to copy, prefetch, drop, unlink and trim. "
      "Text tables by default; --json prints JSON for scripts.",
      "Each COMMAND takes options of its own, listed under COMMANDS below; "
      "memctl COMMAND --help prints them with examples.",
  };
  page.files = {
      {"/run/memd/memd.sock", "The system memd's control socket."},
  };
  page.environment = {
      {"MEMD_DAEMON_UID",
       "The uid memd runs as, when it is another user's: memctl talks only to a daemon "
       "it trusts (root, yourself, the owner of a directory root made for memd)."},
      {"XDG_RUNTIME_DIR",
       "Your own daemon's socket directory is $XDG_RUNTIME_DIR/memd (else "
       "/tmp/memd-$UID); memctl tries it before /run/memd."},
  };
  page.exit_status = {
      {"0", "Success."},
      {"1",
       "The operation failed; stderr says why, as memctl: <what>: <STATUS_CODE>: "
       "<message>."},
      {"2", "The command line was wrong."},
  };
  page.see_also = {"memd(8)"};
  return memctl;
}

}  // namespace memd::clidoc
