// memd: wires the daemon from its configuration and waits for a signal.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/paths.h"
#include "common/version.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/handoff.h"
#include "daemon/durable/notify.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "systemd/sd-daemon.h"

namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("memd");
  // journald stamps every line itself.
  if (std::getenv("JOURNAL_STREAM") != nullptr) {
    logger->set_pattern("%l: %v");
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// The memctl installed beside this memd (build/bin/, /usr/bin/...), or the
// one on PATH.
std::string MemctlPath() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "memctl";
  const std::filesystem::path beside = self.parent_path() / "memctl";
  return std::filesystem::exists(beside, error) ? beside.string() : "memctl";
}

void PrintWelcome(const memd::Daemon& daemon) {
  const std::string dir = daemon.socket_dir();
  const std::string memctl = MemctlPath();
  std::printf(
      "\nmemd is ready. Try it from another terminal:\n"
      "  echo hello | MEMD_SOCKET_DIR=%s %s put welcome /dev/stdin\n"
      "  MEMD_SOCKET_DIR=%s %s get welcome -o -\n\n",
      dir.c_str(), memctl.c_str(), dir.c_str(), memctl.c_str());
  std::fflush(stdout);
}

// Tells the service manager `state`; without one (NOTIFY_SOCKET unset)
// there is nobody to tell. A manager that reads no more costs memd
// kNotifyTimeout, not its service.
void Tell(const std::string& state) {
  const absl::Status sent = memd::durable::NotifyServiceManager(state);
  if (!sent.ok() && !absl::IsFailedPrecondition(sent)) {
    spdlog::warn("service manager: \"{}\" not sent: {}", absl::CEscape(state), sent.ToString());
  }
}

// SIGHUP: reads the flags and the config file again and applies what can
// change while running (the log level and the limits); the rest needs a
// restart, and the log says so when it changed.
void Reload(int argc, char** argv, memd::Daemon& daemon) {
  Tell("RELOADING=1");
  auto config = memd::ParseConfig(argc, argv);
  if (!config.ok()) {
    spdlog::error("SIGHUP: keeping the running configuration: {}",
                  std::string(config.status().message()));
  } else {
    spdlog::set_level(spdlog::level::from_str(config->log_level));
    const std::vector<std::string> waiting = daemon.Reload(*config);
    spdlog::info("SIGHUP: reloaded log level ({}) and limits", config->log_level);
    if (!waiting.empty()) {
      spdlog::warn("SIGHUP: these settings changed but apply only after a "
                   "restart: {}",
                   absl::StrJoin(waiting, ", "));
    }
  }
  Tell("READY=1");
}

// Signals are taken synchronously by the main thread; this blocks them
// before any thread starts so that none of them receives one.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Logs where memd serves and tells the service manager it is ready.
void Announce(const memd::Daemon& daemon) {
  const std::string& dir = daemon.socket_dir();
  spdlog::info("memd {} serving with the {} backend", memd::kVersion,
               daemon.backend_name());
  spdlog::info("control socket {}", memd::ControlSocketPath(dir));
  spdlog::info("session socket {}", memd::SessionSocketPath(dir));
  if (daemon.metrics_address().empty()) {
    spdlog::info("metrics off");
  } else {
    spdlog::info("metrics http://{}/metrics", daemon.metrics_address());
  }
  Tell(absl::StrCat("READY=1\nSTATUS=serving on ", dir, "\nMAINPID=", getpid()));
  // A newcomer running it by hand gets a hint; a service manager does not.
  if (std::getenv("NOTIFY_SOCKET") == nullptr &&
      std::getenv("JOURNAL_STREAM") == nullptr) {
    PrintWelcome(daemon);
  }
}

// The binary to exec for an in-place upgrade: the path this one was started
// from, read at start. A package upgrade replaces the file at that path;
// /proc/self/exe would then name the old, deleted one.
std::string g_binary_path;

// SIGUSR2: execs the binary at g_binary_path (the new version, after an
// upgrade replaced the file) with the descriptors that keep every buffer,
// in place: same pid, so systemd (or whoever started memd) sees one service
// go on, and the new memd takes the buffers back as after a restart, store
// or no store (docs/design.md, "Durability"). A binary that is not there or
// not executable leaves this memd serving; an exec that fails after the
// hand-off ends it (under systemd, its restart takes the buffers back).
// Returns only when the upgrade was refused before anything stopped.
void Upgrade(char** argv, memd::Daemon& daemon) {
  if (::access(g_binary_path.c_str(), X_OK) != 0) {
    spdlog::error("SIGUSR2: cannot upgrade: {} is not an executable file ({}); still serving",
                  g_binary_path, std::strerror(errno));
    return;
  }
  spdlog::warn("SIGUSR2: upgrading in place: exec {}", g_binary_path);
  Tell("RELOADING=1");
  std::vector<memd::durable::PassedFd> fds = daemon.HandOff();
  std::vector<std::string> args;
  for (char** arg = argv; *arg != nullptr; ++arg) args.emplace_back(*arg);
  const absl::Status failed = memd::durable::ExecWithFds(g_binary_path, args, fds);
  spdlog::critical("SIGUSR2: exec {} failed after the hand-off: {}; stopping",
                   g_binary_path, failed.ToString());
  daemon.Shutdown();
  std::_Exit(1);
}

// Serves until SIGTERM or SIGINT, reloading on SIGHUP and upgrading in place
// on SIGUSR2. Under systemd with WatchdogSec=, pings at half the interval,
// and only while the daemon answers (a wedged broker stops the pings and
// systemd restarts memd).
void ServeUntilStopped(int argc, char** argv, const sigset_t& signals,
                       memd::Daemon& daemon) {
  std::uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  const absl::Duration ping_every =
      watchdog ? absl::Microseconds(watchdog_usec) / 2 : absl::InfiniteDuration();
  if (watchdog) spdlog::info("watchdog: pinging every {}", absl::FormatDuration(ping_every));
  for (;;) {
    int signal_number = 0;
    if (watchdog) {
      const timespec timeout = absl::ToTimespec(ping_every);
      signal_number = sigtimedwait(&signals, nullptr, &timeout);
      if (signal_number < 0) {
        if (errno == EAGAIN && daemon.Healthy()) Tell("WATCHDOG=1");
        continue;
      }
    } else if (sigwait(&signals, &signal_number) != 0) {
      continue;
    }
    if (signal_number == SIGHUP) {
      Reload(argc, argv, daemon);
      continue;
    }
    if (signal_number == SIGUSR2) {
      Upgrade(argv, daemon);
      continue;
    }
    spdlog::info("{}: shutting down", strsignal(signal_number));
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves deadlock detection on
  // in every absl::Mutex (gRPC's too): a graph update per lock on the hot
  // path. The tests run the same code with it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto line = memd::ParseCommandLine(argc, argv);
  if (!line.ok()) {
    std::fprintf(stderr, "memd: %s\n", std::string(line.status().message()).c_str());
    return 2;
  }
  if (!line->text.empty()) {  // --help, --version
    std::fputs(line->text.c_str(), stdout);
    return 0;
  }
  SetUpLogging(line->config.log_level);
  {
    std::error_code error;
    g_binary_path = std::filesystem::read_symlink("/proc/self/exe", error).string();
    if (error) g_binary_path = argv[0];
  }
  const sigset_t signals = BlockSignals();

  auto daemon = memd::Daemon::Start(line->config);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", daemon.status().ToString());
    return 1;
  }
  Announce(**daemon);
  ServeUntilStopped(argc, argv, signals, **daemon);
  Tell("STOPPING=1");
  (*daemon)->Shutdown();
  spdlog::info("stopped");
  return 0;
}
