// memd: wires the daemon from its configuration and waits for a signal.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/paths.h"
#include "common/version.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
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

void PrintWelcome(const memd::Daemon& daemon) {
  const std::string dir = daemon.socket_dir();
  std::printf(
      "\nmemd is ready. Try it from another terminal:\n"
      "  echo hello | MEMD_SOCKET_DIR=%s build/bin/memctl put greeting /dev/stdin\n"
      "  MEMD_SOCKET_DIR=%s build/bin/memctl get greeting\n\n",
      dir.c_str(), dir.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves deadlock detection on
  // in every absl::Mutex (gRPC's too): a graph update per lock on the hot
  // path. The tests run the same code with it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto config = memd::ParseConfig(argc, argv);
  if (!config.ok()) {
    if (absl::IsCancelled(config.status())) {  // --help, --version
      std::fputs(std::string(config.status().message()).c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "memd: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  SetUpLogging(config->log_level);

  // Signals are taken synchronously by the main thread; block them before
  // any thread starts so that none of them receives one.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = memd::Daemon::Start(*config);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", daemon.status().ToString());
    return 1;
  }
  const std::string& dir = (*daemon)->socket_dir();
  spdlog::info("memd {} serving with the {} backend", memd::kVersion,
               (*daemon)->backend_name());
  spdlog::info("control socket {}", memd::ControlSocketPath(dir));
  spdlog::info("session socket {}", memd::SessionSocketPath(dir));
  if ((*daemon)->metrics_address().empty()) {
    spdlog::info("metrics off");
  } else {
    spdlog::info("metrics http://{}/metrics", (*daemon)->metrics_address());
  }
  sd_notifyf(0, "READY=1\nSTATUS=serving on %s\nMAINPID=%d", dir.c_str(),
             static_cast<int>(getpid()));
  // A newcomer running it by hand gets a hint; a service manager does not.
  if (std::getenv("NOTIFY_SOCKET") == nullptr &&
      std::getenv("JOURNAL_STREAM") == nullptr) {
    PrintWelcome(**daemon);
  }

  for (;;) {
    int signal_number = 0;
    if (sigwait(&signals, &signal_number) != 0) continue;
    if (signal_number == SIGHUP) {
      spdlog::info("SIGHUP: this version has nothing to reload");
      continue;
    }
    spdlog::info("{}: shutting down", strsignal(signal_number));
    break;
  }
  sd_notify(0, "STOPPING=1");
  (*daemon)->Shutdown();
  spdlog::info("stopped");
  return 0;
}
