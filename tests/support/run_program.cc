#include "tests/support/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace memd::test {

std::string BinDir() {
  // A bundle (tools/gpu-bundle) runs the tests far from the build tree.
  if (const char* dir = std::getenv("MEMD_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return MEMD_BIN_DIR;
}

std::vector<std::string> EnvironmentWith(
    const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view text(*entry);
    const absl::string_view name = text.substr(0, text.find('='));
    if (!overrides.contains(std::string(name))) entries.emplace_back(text);
  }
  for (const auto& [name, value] : overrides) entries.push_back(absl::StrCat(name, "=", value));
  return entries;
}

std::vector<char*> ExecArray(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

namespace {

constexpr char kGdb[] = "/usr/bin/gdb";

ProgramResult Run(const std::string& program, const std::vector<std::string>& args,
                  const std::string& input, const std::map<std::string, std::string>& env,
                  absl::Duration timeout, bool stacks_on_timeout);

}  // namespace

// A hang in CI is then diagnosable from the log alone, not only "killed by
// signal 9" with empty output.
std::string StacksOf(pid_t pid) {
  if (::access(kGdb, X_OK) != 0) return "(no gdb here to show its stacks)\n";
  ProgramResult gdb = Run(kGdb,
                          {"-p", std::to_string(pid), "-batch", "-nx", "-ex",
                           "thread apply all bt"},
                          "", {}, absl::Seconds(60), /*stacks_on_timeout=*/false);
  std::string stacks;
  // gdb's own chatter (symbols read, threads found) says nothing of the hang.
  for (absl::string_view line : absl::StrSplit(gdb.out, '\n')) {
    if (absl::StartsWith(line, "[New LWP") || absl::StartsWith(line, "Reading ") ||
        absl::StartsWith(line, "warning:")) {
      continue;
    }
    absl::StrAppend(&stacks, line, "\n");
  }
  return stacks;
}

absl::StatusOr<std::string> ReadFromChild(int fd, pid_t pid, absl::Duration timeout) {
  pollfd readable{fd, POLLIN, 0};
  int ready = 0;
  const absl::Time deadline = absl::Now() + timeout;
  do {
    const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    ready = ::poll(&readable, 1, std::max(left, 0));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) {
    return absl::DeadlineExceededError(
        absl::StrCat("child ", pid, " said nothing within ", absl::FormatDuration(timeout),
                     "; its threads' stacks:\n", StacksOf(pid)));
  }
  char bytes[256];
  const ssize_t got = ::read(fd, bytes, sizeof(bytes));
  return std::string(bytes, got > 0 ? static_cast<std::size_t>(got) : 0);
}

namespace {

ProgramResult Run(const std::string& program, const std::vector<std::string>& args,
                  const std::string& input, const std::map<std::string, std::string>& env,
                  absl::Duration timeout, bool stacks_on_timeout) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    std::abort();
  }
  std::vector<std::string> argv_storage = {program};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  const std::vector<char*> argv = ExecArray(argv_storage);
  std::vector<std::string> envp_storage = EnvironmentWith(env);
  const std::vector<char*> envp = ExecArray(envp_storage);
  const std::string exec_failed = absl::StrCat("exec ", program, " failed\n");

  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(program.c_str(), argv.data(), envp.data());
    (void)!::write(2, exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  signal(SIGPIPE, SIG_IGN);

  ProgramResult result;
  std::size_t written = 0;
  int in_fd = in[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else {
    ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  const absl::Time deadline = absl::Now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                     {err_open ? err[0] : -1, POLLIN, 0},
                     {in_fd, POLLOUT, 0}};
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) {
      if (stacks_on_timeout) {
        absl::StrAppend(&result.err, "\n--- it outlived its ", absl::FormatDuration(timeout),
                        "; its threads' stacks before SIGKILL ---\n", StacksOf(pid));
      }
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 3, left) < 0 && errno != EINTR) break;
    char chunk[65536];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t got = ::read(fds[i].fd, chunk, sizeof(chunk));
      if (got > 0) {
        (i == 0 ? result.out : result.err).append(chunk, got);
      } else {
        (i == 0 ? out_open : err_open) = false;
      }
    }
    if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t sent = ::write(in_fd, input.data() + written, input.size() - written);
      if (sent > 0) written += static_cast<std::size_t>(sent);
      if (sent < 0 || written == input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace

ProgramResult RunOnATerminal(const std::string& program,
                             const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& typed) {
  ProgramResult result;
  std::vector<std::string> argv_storage = {program};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  const std::vector<char*> argv = ExecArray(argv_storage);
  std::vector<std::string> envp_storage = EnvironmentWith(env);
  const std::vector<char*> envp = ExecArray(envp_storage);
  int terminal = -1;
  const pid_t child = ::forkpty(&terminal, nullptr, nullptr, nullptr);
  if (child < 0) {
    result.err = absl::StrCat("forkpty: ", std::strerror(errno));
    return result;
  }
  if (child == 0) {
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  // The terminal keeps what was typed until the program reads it: a line
  // or two fits its input queue at once.
  for (std::size_t done = 0; done < typed.size();) {
    const ssize_t wrote = ::write(terminal, typed.data() + done, typed.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) break;
    done += static_cast<std::size_t>(wrote);
  }
  char chunk[4096];
  for (;;) {
    const ssize_t got = ::read(terminal, chunk, sizeof(chunk));
    if (got > 0) {
      result.out.append(chunk, static_cast<std::size_t>(got));
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO: the child closed the terminal.
    }
  }
  ::close(terminal);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

ProgramResult RunProgram(const std::string& program,
                         const std::vector<std::string>& args,
                         const std::string& input,
                         const std::map<std::string, std::string>& env,
                         absl::Duration timeout) {
  return Run(program, args, input, env, timeout, /*stacks_on_timeout=*/true);
}

std::string Describe(const ProgramResult& result) {
  return absl::StrCat("exit ", result.exit_code, " signal ", result.signal,
                      "\n--- stdout ---\n", result.out.substr(0, 2000),
                      "\n--- stderr ---\n", result.err);
}

}  // namespace memd::test
