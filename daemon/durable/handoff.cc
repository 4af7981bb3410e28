#include "daemon/durable/handoff.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"

extern char** environ;

namespace memd::durable {
namespace {

constexpr int kTableSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

bool IsHandOffVariable(const char* entry) {
  for (const char* prefix : {"LISTEN_FDS=", "LISTEN_FDNAMES=", "LISTEN_PID=",
                             "MEMD_HANDOFF_FD=", "MEMD_HANDOFF_PID="}) {
    if (absl::StartsWith(entry, prefix)) return true;
  }
  return false;
}

// The table ExecWithFds hands on: "<fd> <name>" a line, sealed.
absl::StatusOr<UniqueFd> WriteTable(std::span<const PassedFd> fds) {
  std::string text;
  for (const PassedFd& passed : fds) absl::StrAppend(&text, passed.fd, " ", std::string(passed.name), "\n");
  UniqueFd table(::memfd_create("memd-handoff", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!table) return ErrnoStatus("memfd_create(memd-handoff)", errno);
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t wrote = ::write(table.get(), text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return ErrnoStatus("write(memd-handoff)", errno);
    done += static_cast<std::size_t>(wrote);
  }
  if (::fcntl(table.get(), F_ADD_SEALS, kTableSeals) != 0) {
    return ErrnoStatus("fcntl(F_ADD_SEALS)", errno);
  }
  return table;
}

absl::Status Refused(const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the descriptors handed on by the memd before this one: ", what));
}

absl::StatusOr<std::string> ReadTable(int table) {
  struct stat st {};
  if (::fstat(table, &st) != 0) return Refused(absl::StrCat("table fd ", table, " is not open"));
  if (!S_ISREG(st.st_mode) || (::fcntl(table, F_GET_SEALS) & kTableSeals) != kTableSeals) {
    return Refused(absl::StrCat("fd ", table, " is not a sealed table"));
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxHandOffTableBytes) {
    return Refused(absl::StrCat("a table of ", st.st_size, " bytes; at most ",
                                kMaxHandOffTableBytes));
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t got = ::pread(table, text.data() + done, text.size() - done,
                                static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Refused("the table ends early");
    done += static_cast<std::size_t>(got);
  }
  return text;
}

}  // namespace

absl::Status ExecWithFds(const std::string& path, const std::vector<std::string>& argv,
                         std::span<const PassedFd> fds) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  absl::flat_hash_set<int> numbers;
  for (const PassedFd& passed : fds) {
    if (!FdNameIsValid(passed.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "descriptor name \"", std::string(passed.name),
          "\" is not 1-255 printable ASCII characters without ':'"));
    }
    if (passed.fd < 0) return absl::InvalidArgumentError(absl::StrCat("descriptor ", passed.fd));
    if (!numbers.insert(passed.fd).second) {
      return absl::InvalidArgumentError(absl::StrCat("descriptor ", passed.fd, " given twice"));
    }
  }
  // The flags to put back if the exec fails; read first, so that a
  // descriptor that is not open changes nothing.
  std::vector<int> flags;
  flags.reserve(fds.size());
  for (const PassedFd& passed : fds) {
    const int now = ::fcntl(passed.fd, F_GETFD);
    if (now < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("descriptor ", passed.fd, " (", std::string(passed.name), ") is not open"));
    }
    flags.push_back(now);
  }
  auto table = WriteTable(fds);
  if (!table.ok()) return table.status();

  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!IsHandOffVariable(*entry)) environment.emplace_back(*entry);
  }
  environment.push_back(absl::StrCat(kHandOffFdVariable, "=", table->get()));
  environment.push_back(absl::StrCat(kHandOffPidVariable, "=", ::getpid()));
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& arg : args) argp.push_back(arg.data());
  argp.push_back(nullptr);

  // Only descriptors given here change, and only their flags: each is the
  // caller's own, so no other thread's number is touched.
  for (std::size_t i = 0; i < fds.size(); ++i) {
    ::fcntl(fds[i].fd, F_SETFD, flags[i] & ~FD_CLOEXEC);
  }
  ::fcntl(table->get(), F_SETFD, 0);
  ::execve(path.c_str(), argp.data(), envp.data());
  const int error = errno;
  for (std::size_t i = 0; i < fds.size(); ++i) ::fcntl(fds[i].fd, F_SETFD, flags[i]);
  return ErrnoStatus(absl::StrCat("execve ", path), error);
}

absl::StatusOr<std::vector<ListenedFd>> TakeHandedOffFds() {
  const char* table_variable = std::getenv(kHandOffFdVariable);
  const char* pid_variable = std::getenv(kHandOffPidVariable);
  const std::string table_text = table_variable == nullptr ? "" : table_variable;
  const std::string pid_text = pid_variable == nullptr ? "" : pid_variable;
  ::unsetenv(kHandOffFdVariable);
  ::unsetenv(kHandOffPidVariable);
  if (table_text.empty()) return std::vector<ListenedFd>{};
  int pid = 0;
  if (!absl::SimpleAtoi(pid_text, &pid)) {
    return Refused(absl::StrCat(kHandOffPidVariable, "=\"", pid_text, "\" is not a pid"));
  }
  if (pid != ::getpid()) return std::vector<ListenedFd>{};
  int table = -1;
  if (!absl::SimpleAtoi(table_text, &table) || table < 3) {
    return Refused(absl::StrCat(kHandOffFdVariable, "=\"", table_text,
                                "\" is not a descriptor from 3 up"));
  }
  auto text = ReadTable(table);
  if (!text.ok()) return text.status();

  // Checked whole before anything is taken: all or nothing.
  std::vector<std::pair<int, std::string>> entries;
  absl::flat_hash_set<int> numbers = {table};
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    ++line_number;
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    int fd = -1;
    const std::string_view name(parts.second.data(), parts.second.size());
    if (!absl::SimpleAtoi(parts.first, &fd) || fd < 3 || !FdNameIsValid(name) ||
        !numbers.insert(fd).second || ::fcntl(fd, F_GETFD) < 0) {
      return Refused(absl::StrCat("line ", line_number, " (\"", std::string(line),
                                  "\") is not an open descriptor from 3 up, named, once"));
    }
    entries.emplace_back(fd, std::string(name));
  }
  std::vector<ListenedFd> taken;
  taken.reserve(entries.size());
  for (auto& [fd, name] : entries) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    taken.push_back({std::move(name), UniqueFd(fd)});
  }
  ::close(table);
  return taken;
}

}  // namespace memd::durable
