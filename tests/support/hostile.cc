#include "tests/support/hostile.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace memd::test {

bool DropPrivileges(uid_t uid, gid_t gid) {
  return ::setgroups(0, nullptr) == 0 && ::setresgid(gid, gid, gid) == 0 &&
         ::setresuid(uid, uid, uid) == 0;
}

void LetOthersTraverse(const std::string& dir) {
  for (std::string path = dir; path.size() > 1;
       path = path.substr(0, path.rfind('/'))) {
    struct stat info;
    if (::stat(path.c_str(), &info) == 0 && (info.st_mode & S_IXOTH) == 0) {
      ::chmod(path.c_str(), (info.st_mode & 07777) | S_IXOTH);
    }
  }
}

bool MakeStickyDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 || ::chmod(dir.c_str(), 01777) != 0) return false;
  LetOthersTraverse(dir);
  return true;
}

void WriteAll(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return;
    done += static_cast<std::size_t>(wrote);
  }
}

ChildResult ForkAs(uid_t uid, gid_t gid, const std::function<int(int out)>& body,
                   absl::Duration timeout) {
  ChildResult result;
  int pipe[2];
  if (::pipe2(pipe, O_CLOEXEC) != 0) std::abort();
  pid_t pid = ::fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    ::close(pipe[0]);
    if (!DropPrivileges(uid, gid)) ::_exit(120);
    ::_exit(body(pipe[1]));
  }
  ::close(pipe[1]);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const int left =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd readable{pipe[0], POLLIN, 0};
    if (::poll(&readable, 1, left) < 0 && errno != EINTR) break;
    if (readable.revents == 0) continue;
    char chunk[4096];
    ssize_t got = ::read(pipe[0], chunk, sizeof(chunk));
    if (got <= 0) break;
    result.out.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

ProgramResult RunHostile(uid_t uid, const std::string& socket_dir,
                         const std::vector<std::string>& args,
                         const std::string& input, absl::Duration timeout) {
  std::vector<std::string> argv = {"--uid", absl::StrCat(uid)};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(BinDir() + "/memd-hostile", argv, input,
                    {{"MEMD_SOCKET_DIR", socket_dir}}, timeout);
}

}  // namespace memd::test
