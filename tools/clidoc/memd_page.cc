#include "common/version.h"
#include "daemon/config.h"
#include "tools/clidoc/pages.h"

namespace memd::clidoc {

Program Memd() {
  Program memd{.app = MakeCommandLineApp(), .page = {}};
  Page& page = memd.page;
  page.section = "8";
  page.source = std::string("memd ") + kVersion;
  page.summary = "per-node GPU and shared-memory broker";
  page.description = {
      "memd owns a node's device memory pools, pinned host staging memory and a "
      "host-device transfer engine. Processes ask it for buffers by name through "
      "libmemd and map them by file descriptor (CUDA VMM, Level Zero, memfd); memctl(1) "
      "shows and operates it. One memd runs per node, usually as the systemd service "
      "memd.service (Type=notify), with its sockets in /run/memd.",
      "Every option but --config is also a key of the TOML file that --config names, "
      "spelt with _ for -: --max-buffer-bytes is max_buffer_bytes. Flags win over the "
      "file. SIGHUP reads the flags and the file again and applies the log level, the "
      "max_* limits and placement; any other change takes effect at the next start, "
      "and memd logs which. SIGTERM and SIGINT stop memd; SIGUSR2 re-executes its binary "
      "in place (an upgrade), keeping every buffer.",
  };
  page.option_note = [](const CLI::Option& option) {
    std::string key = ConfigKey(option);
    return key.empty() ? key : "Configuration key: " + key + ".";
  };
  page.files = {
      {"/etc/memd/memd.toml",
       "The configuration the packaged unit starts memd with (--config); every key is "
       "documented there."},
      {"/run/memd/memd.sock",
       "The control socket (gRPC), in the socket directory (--socket-dir)."},
      {"/run/memd/session.sock",
       "The session socket: clients' credentials, file descriptors and liveness."},
      {"/usr/lib/systemd/system/memd.service", "The systemd unit (as the package installs it)."},
  };
  page.environment = {
      {"MEMD_CUDA_DRIVER", "The CUDA driver library to load when --cuda-driver is not set."},
      {"MEMD_ZE_LOADER",
       "The Level Zero loader to load when --level-zero-loader is not set."},
      {"XDG_RUNTIME_DIR",
       "Not root, memd's default socket directory is $XDG_RUNTIME_DIR/memd (else "
       "/tmp/memd-$UID)."},
      {"NOTIFY_SOCKET",
       "Set by systemd: memd reports readiness and the watchdog there, and keeps its "
       "buffers' descriptors in systemd's file descriptor store across restarts."},
      {"JOURNAL_STREAM", "Set by systemd: memd leaves time stamps to the journal."},
  };
  page.exit_status = {
      {"0", "memd stopped on SIGTERM or SIGINT, or printed --help or --version."},
      {"1", "memd could not start; the log says why."},
      {"2", "The command line or the configuration file is wrong; stderr says how."},
  };
  page.see_also = {"memctl(1)", "systemctl(1)", "journalctl(1)"};
  return memd;
}

}  // namespace memd::clidoc
