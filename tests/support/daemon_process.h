#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

/// A real build/bin/memd running as a child process on a private socket
/// directory, metrics on a free loopback port. The test plays systemd: the
/// daemon's NOTIFY_SOCKET is ours, so Start returns when memd says READY=1
/// (no sleeps), and the notifications stay readable. Like systemd, it reads
/// every notification as it comes (a thread of its own): memd's messages
/// never wait for room in the queue, whatever the test reads. Kills the
/// daemon on destruction. Not thread-safe.
class DaemonProcess {
 public:
  // Starts memd with `extra_args`; --socket-dir and --metrics-address
  // default to a private directory and a free loopback port unless given;
  // `cpu` >= 0 pins the daemon (every thread it will have) to that CPU.
  // Errors: INTERNAL when it exits or stays silent for `timeout`; the
  // message carries how it exited ("exit status N") and its stderr.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      std::vector<std::string> extra_args = {},
      absl::Duration timeout = absl::Seconds(20), int cpu = -1);

  // As Start, with `environment` added to the daemon's (a fake driver's
  // MEMD_FAKE_* switches): set in the child only, so this process and the
  // programs it starts later keep their own.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> StartWithEnvironment(
      std::vector<std::string> extra_args, std::map<std::string, std::string> environment);

  // Who the daemon runs as, for tests of limits that bind only an
  // unprivileged daemon.
  struct Identity {
    uid_t uid = 0;  // Group `uid`, no supplementary groups; 0: this process's.
    std::uint64_t descriptor_limit = 0;  // RLIMIT_NOFILE; 0: inherited.
  };
  // As Start; the socket directory is made for `identity.uid` beforehand.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> StartAs(
      const Identity& identity, std::vector<std::string> extra_args = {},
      absl::Duration timeout = absl::Seconds(20));
  ~DaemonProcess();

  const std::string& socket_dir() const { return socket_dir_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits for the exit. Returns the exit code (or
  // 128 + signal when killed); -1 on timeout.
  int Stop(int signal, absl::Duration timeout = absl::Seconds(20));

  // The next notification datagram ("READY=1\n...") not yet taken, or
  // empty after timeout. Descriptors sent with one (FDSTORE=1) are closed.
  std::string NextNotification(absl::Duration timeout);

  // What the daemon wrote to stderr so far.
  std::string Log() const;

 private:
  DaemonProcess() = default;
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Launch(
      const Identity& identity, std::vector<std::string> extra_args,
      absl::Duration timeout, int cpu,
      const std::map<std::string, std::string>& environment = {});

  // Reads notify_ into notes_ until stop_ is written to.
  void ReadNotifications();

  TempDir dir_;
  std::string socket_dir_;
  std::string log_path_;
  UniqueFd notify_;
  UniqueFd stop_reading_[2];  // A pipe: written to at destruction.
  std::thread reader_;
  absl::Mutex mu_;
  std::deque<std::string> notes_ ABSL_GUARDED_BY(mu_);
  pid_t pid_ = -1;
};

}  // namespace memd::test
