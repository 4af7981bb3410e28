#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

/// systemd 252's side of ONE Type=notify service with NotifyAccess=main,
/// Restart=always and FileDescriptorStoreMax=`fd_store_max`, for tests of a
/// service that keeps descriptors in its manager's store. It binds a
/// datagram socket (SO_PASSCRED) in a private directory, reads notify
/// messages on a thread of its own and keeps what they say, as systemd does:
/// - only messages whose kernel credentials name the main pid count; others
///   are counted and their descriptors closed;
/// - FDSTORE=1 keeps the descriptors under FDNAME= ("stored" when missing or
///   invalid), suppresses one that is the same open file as one kept, and
///   closes those beyond the max (counted); FDSTOREREMOVE=1 closes all kept
///   under FDNAME=; descriptors sent with any other message are closed;
/// - kept descriptors that poll POLLHUP or POLLERR are dropped (counted),
///   checked on each store and before each start (systemd watches them all
///   the time; these are the moments a test can observe).
/// The service starts with the store as LISTEN_FDS / LISTEN_FDNAMES /
/// LISTEN_PID, fds from 3. Start after the service died keeps the store
/// (Restart=); Stop empties it (the unit goes inactive with no job queued).
/// Owns the socket, the thread, the kept descriptors and the service (killed
/// with SIGKILL on destruction). Thread-safe.
class ServiceManager {
 public:
  struct Options {
    std::size_t fd_store_max = 16;
  };

  // What the manager has seen and keeps, at one moment.
  struct Snapshot {
    std::vector<std::string> stored_names;  // One per kept descriptor, in LISTEN order.
    std::size_t dropped_over_max = 0;
    std::size_t dropped_hangup = 0;
    std::size_t duplicates = 0;
    std::size_t messages = 0;        // Every datagram read.
    std::size_t foreign_messages = 0;  // Ignored: not from the main pid.
    bool ready = false;              // READY=1 since the last start.
    std::vector<std::string> statuses;  // STATUS= values, oldest first.
    std::size_t watchdog_pings = 0;
    std::vector<pid_t> mainpid_reports;  // MAINPID= values (the main pid is not changed).
    pid_t main_pid = -1;                 // -1 when the service is not running.
    std::optional<int> exit_status;  // Of the last run: exit code, or 128 + signal.
  };

  // Errors: INTERNAL when the socket or the thread cannot be set up.
  static absl::StatusOr<std::unique_ptr<ServiceManager>> Create(Options options);
  static absl::StatusOr<std::unique_ptr<ServiceManager>> Create() { return Create(Options{}); }
  ~ServiceManager();
  ServiceManager(const ServiceManager&) = delete;
  ServiceManager& operator=(const ServiceManager&) = delete;

  // Starts `program` with `args` (argv[0] is `program`), this process's
  // environment plus `env`, NOTIFY_SOCKET and the store. Errors:
  // FAILED_PRECONDITION while the service runs; INTERNAL when fork fails
  // (an exec failure shows as exit status 127).
  absl::Status Start(const std::string& program, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {});

  // Returns once the service said READY=1 since its start. Errors:
  // FAILED_PRECONDITION when it exited first (with its status and
  // statuses), DEADLINE_EXCEEDED.
  absl::Status WaitReady(absl::Duration timeout = absl::Seconds(20));

  // Sends `signal` to the service. Errors: FAILED_PRECONDITION when it is
  // not running.
  absl::Status Kill(int signal);

  // Waits for the service to exit; its exit code, or 128 + signal. Errors:
  // FAILED_PRECONDITION when none was started, DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(20));

  // `systemctl stop`: SIGTERM, SIGKILL after `timeout`, then the store is
  // emptied. The exit status. Errors: as Wait.
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(20));

  // `systemctl restart`: as Stop but keeping the store, then Start with the
  // last program, arguments and environment. Errors: as Stop and Start.
  absl::Status Restart(absl::Duration timeout = absl::Seconds(20));

  Snapshot Current() const;

  // Waits until `done` holds for the current snapshot; whether it did
  // before `timeout`; `done` runs under the manager's lock and must not
  // call it. Messages are read in the order one sender sent them,
  // so waiting for the service's READY=1 or a later message also waits for
  // everything it sent before.
  bool WaitFor(const std::function<bool(const Snapshot&)>& done,
               absl::Duration timeout = absl::Seconds(20));

  // Duplicates of the descriptors kept under `name` (CLOEXEC), to check
  // what the service stored.
  std::vector<UniqueFd> DupStored(const std::string& name) const;

  // Keeps a duplicate of `fd` under `name` as if the service had stored it
  // (FDSTORE=1, FDNAME=`name`), for a test that hands a service descriptors
  // no run of it stored: another build's, or ones made by hand. The
  // descriptor stays the caller's. Errors: INVALID_ARGUMENT for a name
  // systemd refuses; FAILED_PRECONDITION while the service runs;
  // RESOURCE_EXHAUSTED when the store is full (fd_store_max); INTERNAL when
  // dup fails.
  absl::Status Preload(const std::string& name, int fd);

  const std::string& notify_socket() const { return socket_path_; }

 private:
  struct Kept {
    std::string name;
    UniqueFd fd;
  };
  struct Launch {
    std::string program;
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
  };

  explicit ServiceManager(Options options) : options_(options) {}
  Snapshot SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Receive();
  void ReadMessage() ABSL_LOCKS_EXCLUDED(mu_);
  void Handle(pid_t sender, const std::string& text, std::vector<UniqueFd> fds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddToStore(const std::string& name, std::vector<UniqueFd> fds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropHungUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reap() ABSL_LOCKS_EXCLUDED(mu_);
  void Wake();

  const Options options_;
  TempDir dir_;
  std::string socket_path_;
  UniqueFd socket_;
  UniqueFd wake_;  // An eventfd: the thread rereads pidfd_ or ends.
  std::thread thread_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // Signalled on every change to what Current shows.
  std::vector<Kept> store_ ABSL_GUARDED_BY(mu_);
  Snapshot seen_ ABSL_GUARDED_BY(mu_);  // Its stored_names are filled by Current.
  UniqueFd pidfd_ ABSL_GUARDED_BY(mu_);  // The running service's, polled by the thread.
  std::optional<Launch> last_ ABSL_GUARDED_BY(mu_);
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace memd::test
