#include "tests/support/service_manager.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace memd::test {
namespace {

// systemd 252's limits on one notify message (NOTIFY_BUFFER_MAX = PIPE_BUF,
// NOTIFY_FD_MAX); a longer message is ignored whole.
constexpr std::size_t kMessageMax = 4096;
constexpr std::size_t kFdsMax = 768;

// systemd's fdname_is_valid: the empty name passes.
bool SystemdFdNameIsValid(absl::string_view name) {
  if (name.size() > 255) return false;
  for (char c : name) {
    if (c < ' ' || c > '~' || c == ':') return false;
  }
  return true;
}

// systemd's same_fd, for what a memfd, socket or pipe can be: the same
// inode with the same file status flags (the two ends of a pipe differ
// there); devices never count as the same.
bool SameOpenFile(int a, int b) {
  struct stat sa, sb;
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  if (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino) return false;
  if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) return false;
  return ::fcntl(a, F_GETFL) == ::fcntl(b, F_GETFL);
}

bool IsManagerVariable(const std::string& entry) {
  return absl::StartsWith(entry, "NOTIFY_SOCKET=") || absl::StartsWith(entry, "LISTEN_FDS=") ||
         absl::StartsWith(entry, "LISTEN_FDNAMES=") || absl::StartsWith(entry, "LISTEN_PID=");
}

// Writes `value` in decimal at `out` (room for 20 digits and a NUL), with
// nothing but stores: runs between fork and exec.
void FormatPid(pid_t value, char* out) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServiceManager>> ServiceManager::Create(Options options) {
  std::unique_ptr<ServiceManager> manager(new ServiceManager(options));
  manager->socket_path_ = manager->dir_.Join("notify");
  manager->socket_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!manager->socket_) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, manager->socket_path_.c_str(), sizeof(address.sun_path) - 1);
  if (::bind(manager->socket_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    return absl::InternalError(absl::StrCat("bind ", manager->socket_path_, ": ",
                                            std::strerror(errno)));
  }
  // The kernel then attaches every sender's credentials, whether or not it
  // sent any: how systemd tells the main pid from others.
  const int on = 1;
  if (::setsockopt(manager->socket_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
    return absl::InternalError(absl::StrCat("SO_PASSCRED: ", std::strerror(errno)));
  }
  manager->wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!manager->wake_) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  manager->thread_ = std::thread([m = manager.get()] { m->Receive(); });
  return manager;
}

ServiceManager::~ServiceManager() {
  {
    absl::MutexLock lock(&mu_);
    ending_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  if (seen_.main_pid > 0) {
    ::kill(seen_.main_pid, SIGKILL);
    ::waitpid(seen_.main_pid, nullptr, 0);
  }
}

void ServiceManager::Wake() {
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void ServiceManager::Receive() {
  for (;;) {
    int pidfd;
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return;
      pidfd = pidfd_.get();
    }
    pollfd fds[3] = {{socket_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}, {pidfd, POLLIN, 0}};
    if (::poll(fds, pidfd >= 0 ? 3 : 2, -1) < 0) continue;
    if (fds[1].revents != 0) {
      std::uint64_t count;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    // Messages before the exit: a service that says READY=1 and dies has
    // said it.
    if (fds[0].revents != 0) ReadMessage();
    if (pidfd >= 0 && fds[2].revents != 0) Reap();
  }
}

void ServiceManager::ReadMessage() {
  for (;;) {
    char text[kMessageMax];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kFdsMax)];
    iovec io{text, sizeof(text)};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const ssize_t got =
        ::recvmsg(socket_.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
    if (got < 0) return;  // EAGAIN: all read.
    std::vector<UniqueFd> fds;
    std::optional<ucred> sender;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET) continue;
      if (c->cmsg_type == SCM_RIGHTS) {
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          fds.emplace_back(fd);
        }
      } else if (c->cmsg_type == SCM_CREDENTIALS) {
        ucred credentials;
        std::memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
        sender = credentials;
      }
    }
    absl::MutexLock lock(&mu_);
    ++seen_.messages;
    // As systemd: a truncated message or one without credentials is
    // ignored whole, its descriptors closed.
    const bool whole = static_cast<std::size_t>(got) < sizeof(text) &&
                       (message.msg_flags & MSG_CTRUNC) == 0;
    if (!whole || !sender.has_value() || sender->pid <= 0 || sender->pid != seen_.main_pid) {
      ++seen_.foreign_messages;
    } else {
      Handle(sender->pid, std::string(text, got), std::move(fds));
    }
    changed_.SignalAll();
  }
}

void ServiceManager::Handle(pid_t /*sender*/, const std::string& text,
                            std::vector<UniqueFd> fds) {
  std::vector<std::string> tags = absl::StrSplit(text, '\n', absl::SkipEmpty());
  const std::string* fdname = nullptr;
  bool store = false, remove = false;
  for (const std::string& tag : tags) {
    if (tag == "READY=1") seen_.ready = true;
    if (tag == "WATCHDOG=1") ++seen_.watchdog_pings;
    if (tag == "FDSTORE=1") store = true;
    if (tag == "FDSTOREREMOVE=1") remove = true;
    if (absl::StartsWith(tag, "STATUS=")) seen_.statuses.push_back(tag.substr(7));
    if (absl::StartsWith(tag, "FDNAME=") && fdname == nullptr) fdname = &tag;
    pid_t pid;
    if (absl::StartsWith(tag, "MAINPID=") && absl::SimpleAtoi(tag.substr(8), &pid)) {
      seen_.mainpid_reports.push_back(pid);
    }
  }
  const std::string name = fdname != nullptr ? fdname->substr(7) : std::string();
  const bool name_valid = fdname != nullptr && SystemdFdNameIsValid(name);
  if (store) AddToStore(name_valid ? name : "stored", std::move(fds));
  if (remove && name_valid) {
    std::erase_if(store_, [&](const Kept& kept) { return kept.name == name; });
  }
  // Descriptors of any other message close here, as systemd closes them.
}

void ServiceManager::AddToStore(const std::string& name, std::vector<UniqueFd> fds) {
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (store_.size() >= options_.fd_store_max) {
      // systemd logs "Cannot store more fds than FileDescriptorStoreMax=,
      // closing remaining." and closes the rest of the message.
      seen_.dropped_over_max += fds.size() - i;
      break;
    }
    bool duplicate = false;
    for (const Kept& kept : store_) duplicate = duplicate || SameOpenFile(kept.fd.get(), fds[i].get());
    if (duplicate) {
      ++seen_.duplicates;
      continue;
    }
    store_.push_back({name, std::move(fds[i])});
  }
  DropHungUp();
}

void ServiceManager::DropHungUp() {
  std::erase_if(store_, [&](const Kept& kept) {
    pollfd fd{kept.fd.get(), 0, 0};
    const bool gone = ::poll(&fd, 1, 0) == 1 && (fd.revents & (POLLHUP | POLLERR)) != 0;
    if (gone) ++seen_.dropped_hangup;
    return gone;
  });
}

void ServiceManager::Reap() {
  absl::MutexLock lock(&mu_);
  int status;
  if (seen_.main_pid <= 0 || ::waitpid(seen_.main_pid, &status, WNOHANG) != seen_.main_pid) {
    return;
  }
  seen_.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  seen_.main_pid = -1;
  pidfd_.reset();
  changed_.SignalAll();
}

absl::Status ServiceManager::Start(const std::string& program,
                                   const std::vector<std::string>& args,
                                   const std::map<std::string, std::string>& env) {
  absl::MutexLock lock(&mu_);
  if (seen_.main_pid > 0) {
    return absl::FailedPreconditionError(absl::StrCat("running as pid ", seen_.main_pid));
  }
  DropHungUp();

  // Everything the child needs is built here: between fork and exec only
  // async-signal-safe calls are allowed (this process has threads).
  std::vector<std::string> arguments = {program};
  arguments.insert(arguments.end(), args.begin(), args.end());
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string key = text.substr(0, text.find('='));
    if (!IsManagerVariable(text) && !env.contains(key)) environment.push_back(text);
  }
  for (const auto& [key, value] : env) environment.push_back(absl::StrCat(key, "=", value));
  environment.push_back(absl::StrCat("NOTIFY_SOCKET=", socket_path_));
  const int count = static_cast<int>(store_.size());
  std::vector<int> sources;
  std::vector<std::string> names;
  for (const Kept& kept : store_) {
    sources.push_back(kept.fd.get());
    names.push_back(kept.name);
  }
  char listen_pid[40] = "LISTEN_PID=";
  const std::size_t pid_at = std::strlen(listen_pid);
  if (count > 0) {
    environment.push_back(absl::StrCat("LISTEN_FDS=", count));
    environment.push_back(absl::StrCat("LISTEN_FDNAMES=", absl::StrJoin(names, ":")));
  }
  std::vector<char*> argv, envp;
  for (std::string& arg : arguments) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (std::string& entry : environment) envp.push_back(entry.data());
  if (count > 0) envp.push_back(listen_pid);
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    FormatPid(::getpid(), listen_pid + pid_at);
    // A test that crashes takes its memd with it: an orphan would keep the
    // test's output pipe open and ctest waiting until its timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Copies above 3 + count first, so no move overwrites a source still to
    // move; they are CLOEXEC and vanish at exec, dup2's targets are not.
    const int above = 3 + count;
    for (int i = 0; i < count; ++i) {
      sources[i] = ::fcntl(sources[i], F_DUPFD_CLOEXEC, above);
      if (sources[i] < 0) ::_exit(126);
    }
    for (int i = 0; i < count; ++i) {
      if (::dup2(sources[i], 3 + i) < 0) ::_exit(126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  seen_.main_pid = pid;
  seen_.ready = false;
  seen_.exit_status.reset();
  // glibc 2.36's <sys/pidfd.h> declares pidfd_open without extern "C".
  pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  last_ = Launch{program, args, env};
  changed_.SignalAll();
  Wake();
  return absl::OkStatus();
}

absl::Status ServiceManager::WaitReady(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (seen_.ready) return absl::OkStatus();
    if (seen_.main_pid <= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the service exited before READY=1 with status ",
          seen_.exit_status.value_or(-1), "; statuses: ", absl::StrJoin(seen_.statuses, " | ")));
    }
    if (changed_.WaitWithDeadline(&mu_, deadline)) {
      if (seen_.ready) return absl::OkStatus();
      return absl::DeadlineExceededError("no READY=1 in time");
    }
  }
}

absl::Status ServiceManager::Kill(int signal) {
  absl::MutexLock lock(&mu_);
  if (seen_.main_pid <= 0) return absl::FailedPreconditionError("not running");
  ::kill(seen_.main_pid, signal);  // Not reaped yet, so the pid is still ours.
  return absl::OkStatus();
}

absl::StatusOr<int> ServiceManager::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  if (!last_.has_value()) return absl::FailedPreconditionError("never started");
  while (seen_.main_pid > 0) {
    if (changed_.WaitWithDeadline(&mu_, deadline) && seen_.main_pid > 0) {
      return absl::DeadlineExceededError("still running");
    }
  }
  return seen_.exit_status.value_or(-1);
}

absl::StatusOr<int> ServiceManager::Stop(absl::Duration timeout) {
  if (Kill(SIGTERM).ok()) {
    absl::StatusOr<int> status = Wait(timeout);
    if (!status.ok() && Kill(SIGKILL).ok()) status = Wait(timeout);
    if (!status.ok()) return status;
  }
  absl::MutexLock lock(&mu_);
  if (!last_.has_value()) return absl::FailedPreconditionError("never started");
  store_.clear();
  changed_.SignalAll();
  return seen_.exit_status.value_or(-1);
}

absl::Status ServiceManager::Restart(absl::Duration timeout) {
  if (Kill(SIGTERM).ok()) {
    absl::StatusOr<int> status = Wait(timeout);
    if (!status.ok() && Kill(SIGKILL).ok()) status = Wait(timeout);
    if (!status.ok()) return status.status();
  }
  Launch launch;
  {
    absl::MutexLock lock(&mu_);
    if (!last_.has_value()) return absl::FailedPreconditionError("never started");
    launch = *last_;
  }
  return Start(launch.program, launch.args, launch.env);
}

ServiceManager::Snapshot ServiceManager::SnapshotLocked() const {
  Snapshot snapshot = seen_;
  for (const Kept& kept : store_) snapshot.stored_names.push_back(kept.name);
  return snapshot;
}

ServiceManager::Snapshot ServiceManager::Current() const {
  absl::MutexLock lock(&mu_);
  return SnapshotLocked();
}

bool ServiceManager::WaitFor(const std::function<bool(const Snapshot&)>& done,
                             absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (done(SnapshotLocked())) return true;
    if (changed_.WaitWithDeadline(&mu_, deadline)) return done(SnapshotLocked());
  }
}

std::vector<UniqueFd> ServiceManager::DupStored(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::vector<UniqueFd> copies;
  for (const Kept& kept : store_) {
    if (kept.name == name) copies.emplace_back(::fcntl(kept.fd.get(), F_DUPFD_CLOEXEC, 3));
  }
  return copies;
}

absl::Status ServiceManager::Preload(const std::string& name, int fd) {
  if (name.empty() || !SystemdFdNameIsValid(name)) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a valid FDNAME"));
  }
  absl::MutexLock lock(&mu_);
  if (seen_.main_pid > 0) {
    return absl::FailedPreconditionError(absl::StrCat("running as pid ", seen_.main_pid));
  }
  if (store_.size() >= options_.fd_store_max) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store holds ", store_.size(), " descriptors already"));
  }
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!copy) return absl::InternalError(absl::StrCat("dup: ", std::strerror(errno)));
  store_.push_back({name, std::move(copy)});
  changed_.SignalAll();
  return absl::OkStatus();
}

}  // namespace memd::test
