// memd-fd-store-service: a stand-in for memd in tests of the descriptor
// store. Runs its arguments as steps, in order:
//   listen            TakeListenedFds; STATUS=listened <name>=<contents>...
//                     (contents of each memfd; "!cloexec" after a name whose
//                     CLOEXEC is missing, "!env" when LISTEN_FDS is still set)
//   store=NAME=TEXT   a memfd holding TEXT, stored under NAME
//   storemany=NAME=N  N memfds ("0", "1"...) in one message under NAME
//   storehup=NAME     one end of a socket pair, stored; the other is closed
//   remove=NAME       FDSTOREREMOVE
//   try=NAME          stores a memfd under NAME; STATUS=try <status code>
//   ready             READY=1
//   pause             waits for a signal, forever
//   exec STEPS...     ExecWithFds of itself with the remaining steps: the listened fds
//                     (reversed), else two memfds "a"="alpha" and "b"="beta" put at
//                     fds 40 and 41, with a bystander memfd (CLOEXEC) at fd 3
//   print             listen, printed to stdout, one "<name>@<fd>=<contents>" a line,
//                     then "3 open" or "3 closed"
// Any failure: STATUS=error ... and exit 1.

#include <sys/mman.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/handoff.h"

namespace {

using memd::durable::FdStore;

[[noreturn]] void Fail(const std::string& what) {
  sd_notify(0, absl::StrCat("STATUS=error ", what).c_str());
  std::fprintf(stderr, "memd-fd-store-service: %s\n", what.c_str());
  std::exit(1);
}

int Memfd(const std::string& text) {
  const int fd = ::memfd_create("fd-store-test", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    Fail("memfd");
  }
  return fd;
}

std::string Contents(int fd) {
  char buffer[256];
  const ssize_t got = ::pread(fd, buffer, sizeof(buffer), 0);
  return got > 0 ? std::string(buffer, got) : std::string();
}

std::vector<memd::durable::ListenedFd> Listen() {
  auto taken = memd::durable::TakeListenedFds();
  if (!taken.ok()) Fail(taken.status().ToString());
  return std::move(*taken);
}

std::string Describe(const std::vector<memd::durable::ListenedFd>& fds, const char* separator) {
  std::string text;
  for (const auto& fd : fds) {
    absl::StrAppend(&text, fd.name, "=", Contents(fd.fd.get()),
                    (::fcntl(fd.fd.get(), F_GETFD) & FD_CLOEXEC) ? "" : "!cloexec", separator);
  }
  if (std::getenv("LISTEN_FDS") != nullptr) absl::StrAppend(&text, "!env", separator);
  return text;
}

FdStore& Store() {
  static auto store = memd::durable::ServiceManagerStore();
  if (store == nullptr) Fail("no NOTIFY_SOCKET");
  return *store;
}

void Exec(const char* self, std::vector<std::string> steps) {
  std::vector<memd::durable::ListenedFd> listened = Listen();
  std::vector<memd::durable::PassedFd> passed;
  if (!listened.empty()) {
    for (auto it = listened.rbegin(); it != listened.rend(); ++it) {
      passed.push_back({it->name, it->fd.get()});
    }
  } else {
    // What the hand-off must not touch: a descriptor at 3 that is not
    // passed, the number LISTEN_FDS would put the first passed one at.
    const int alpha = Memfd("alpha"), beta = Memfd("beta"), bystander = Memfd("bystander");
    if (::dup3(alpha, 40, O_CLOEXEC) < 0 || ::dup3(beta, 41, O_CLOEXEC) < 0 ||
        (bystander != 3 && ::dup3(bystander, 3, O_CLOEXEC) < 0)) {
      Fail("dup3");
    }
    for (int fd : {alpha, beta, bystander}) {
      if (fd != 3) ::close(fd);
    }
    passed = {{"a", 40}, {"b", 41}};
  }
  steps.insert(steps.begin(), self);
  const absl::Status status = memd::durable::ExecWithFds(self, steps, passed);
  Fail(absl::StrCat("ExecWithFds: ", status.ToString()));
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string step = argv[i];
    std::vector<std::string> parts = absl::StrSplit(step, absl::MaxSplits('=', 2));
    const std::string& verb = parts[0];
    if (verb == "listen") {
      sd_notify(0, absl::StrCat("STATUS=listened ", Describe(Listen(), " ")).c_str());
    } else if (verb == "print") {
      for (const auto& fd : Listen()) {
        std::printf("%s@%d=%s\n", fd.name.c_str(), fd.fd.get(), Contents(fd.fd.get()).c_str());
      }
      std::printf("3 %s\n", ::fcntl(3, F_GETFD) < 0 ? "closed" : "open");
      std::fflush(stdout);
    } else if (verb == "store" && parts.size() == 3) {
      const int fd = Memfd(parts[2]);
      if (auto status = Store().Store(parts[1], fd); !status.ok()) Fail(status.ToString());
      ::close(fd);
    } else if (verb == "storemany" && parts.size() == 3) {
      int count = 0;
      if (!absl::SimpleAtoi(parts[2], &count)) Fail(step);
      std::vector<int> fds;
      for (int n = 0; n < count; ++n) fds.push_back(Memfd(absl::StrCat(n)));
      const absl::Status status = Store().StoreMany(parts[1], fds);
      sd_notify(0, absl::StrCat("STATUS=storemany ", absl::StatusCodeToString(status.code()))
                       .c_str());
      for (int fd : fds) ::close(fd);
    } else if (verb == "storehup" && parts.size() == 2) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) Fail("socketpair");
      if (auto status = Store().Store(parts[1], pair[0]); !status.ok()) Fail(status.ToString());
      ::close(pair[0]);
      ::close(pair[1]);
    } else if (verb == "remove" && parts.size() == 2) {
      if (auto status = Store().Remove(parts[1]); !status.ok()) Fail(status.ToString());
    } else if (verb == "try") {
      const int fd = Memfd("x");
      const std::string name = step.substr(4);
      const absl::Status status = Store().Store(name, fd);
      sd_notify(0, absl::StrCat("STATUS=try ", absl::StatusCodeToString(status.code())).c_str());
      ::close(fd);
    } else if (verb == "ready") {
      sd_notify(0, "READY=1");
    } else if (verb == "pause") {
      for (;;) ::pause();
    } else if (verb == "exec") {
      Exec(argv[0], std::vector<std::string>(argv + i + 1, argv + argc));
    } else {
      Fail(absl::StrCat("unknown step ", step));
    }
  }
  return 0;
}
