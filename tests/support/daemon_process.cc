#include "tests/support/daemon_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/files.h"
#include "tests/support/hostile.h"
#include "tests/support/run_program.h"

namespace memd::test {

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    std::vector<std::string> extra_args, absl::Duration timeout, int cpu) {
  return Launch(Identity{}, std::move(extra_args), timeout, cpu);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::StartAs(
    const Identity& identity, std::vector<std::string> extra_args,
    absl::Duration timeout) {
  return Launch(identity, std::move(extra_args), timeout, -1);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::StartWithEnvironment(
    std::vector<std::string> extra_args, std::map<std::string, std::string> environment) {
  return Launch(Identity{}, std::move(extra_args), absl::Seconds(20), -1, environment);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Launch(
    const Identity& identity, std::vector<std::string> extra_args,
    absl::Duration timeout, int cpu, const std::map<std::string, std::string>& environment) {
  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess);
  daemon->socket_dir_ = daemon->dir_.Join("run");
  daemon->log_path_ = daemon->dir_.Join("memd.log");
  const std::string notify_path = daemon->dir_.Join("notify");

  daemon->notify_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, notify_path.c_str(), sizeof(address.sun_path) - 1);
  if (::bind(daemon->notify_.get(), reinterpret_cast<sockaddr*>(&address),
             sizeof(address)) != 0) {
    return absl::InternalError(absl::StrCat("bind notify socket: ", std::strerror(errno)));
  }
  int pipe_ends[2];
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  daemon->stop_reading_[0].reset(pipe_ends[0]);
  daemon->stop_reading_[1].reset(pipe_ends[1]);
  daemon->reader_ = std::thread([d = daemon.get()] { d->ReadNotifications(); });

  if (identity.uid != 0) {
    // A socket directory of the daemon's own in a root-owned one others may
    // search (what memd and its clients trust), and a notify socket it may
    // write to.
    ::chmod(daemon->dir_.path().c_str(), 0755);
    ::chmod(notify_path.c_str(), 0666);
    if (::mkdir(daemon->socket_dir_.c_str(), 0755) != 0 ||
        ::chown(daemon->socket_dir_.c_str(), identity.uid, identity.uid) != 0) {
      return absl::InternalError(absl::StrCat("prepare ", daemon->socket_dir_, ": ",
                                              std::strerror(errno)));
    }
  }

  // Flags the caller gives win over the harness's defaults.
  auto given = [&](const std::string& flag) -> const std::string* {
    for (std::size_t i = 0; i + 1 < extra_args.size(); ++i) {
      if (extra_args[i] == flag) return &extra_args[i + 1];
    }
    return nullptr;
  };
  std::vector<std::string> args = {BinDir() + "/memd"};
  if (const std::string* dir = given("--socket-dir")) {
    daemon->socket_dir_ = *dir;
  } else {
    args.insert(args.end(), {"--socket-dir", daemon->socket_dir_});
  }
  if (given("--metrics-address") == nullptr) {
    args.insert(args.end(), {"--metrics-address", "127.0.0.1:0"});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const std::vector<char*> argv = ExecArray(args);
  std::map<std::string, std::string> overrides = environment;
  overrides.try_emplace("NOTIFY_SOCKET", notify_path);
  std::vector<std::string> envp_storage = EnvironmentWith(overrides);
  const std::vector<char*> envp = ExecArray(envp_storage);

  pid_t pid = ::fork();
  if (pid == 0) {
    int log = ::open(daemon->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 2);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    if (identity.descriptor_limit != 0) {
      const rlimit limit{identity.descriptor_limit, identity.descriptor_limit};
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(126);
    }
    if (identity.uid != 0 && !DropPrivileges(identity.uid, identity.uid)) ::_exit(126);
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      ::sched_setaffinity(0, sizeof(set), &set);
    }
    // A test that crashes takes its memd with it: an orphan would keep the
    // test's output pipe open and ctest waiting until its timeout. Set last:
    // a change of uid clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  daemon->pid_ = pid;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string note = daemon->NextNotification(absl::Milliseconds(50));
    if (absl::StrContains(note, "READY=1")) return daemon;
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      daemon->pid_ = -1;
      const std::string how = WIFEXITED(status)
                                  ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                  : absl::StrCat("signal ", WTERMSIG(status));
      return absl::InternalError(
          absl::StrCat("memd exited during start-up (", how, "):\n", daemon->Log()));
    }
  }
  return absl::InternalError(
      absl::StrCat("memd did not report READY=1 in time:\n", daemon->Log()));
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (reader_.joinable()) {
    (void)!::write(stop_reading_[1].get(), "x", 1);
    reader_.join();
  }
}

void DaemonProcess::ReadNotifications() {
  for (;;) {
    pollfd fds[2] = {{notify_.get(), POLLIN, 0}, {stop_reading_[0].get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    // No control buffer: the kernel closes what an FDSTORE=1 carried.
    char buffer[4096];
    const ssize_t got = ::recv(notify_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got <= 0) continue;
    absl::MutexLock lock(&mu_);
    notes_.emplace_back(buffer, got);
  }
}

int DaemonProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (absl::Now() > deadline) return -1;
    // Children cannot be waited on with a timeout.
    ::poll(nullptr, 0, 10);
  }
}

std::string DaemonProcess::NextNotification(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto arrived = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !notes_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&arrived), std::max(timeout, absl::ZeroDuration()))) {
    return "";
  }
  std::string note = std::move(notes_.front());
  notes_.pop_front();
  return note;
}

std::string DaemonProcess::Log() const { return ReadWholeFile(log_path_); }

}  // namespace memd::test
