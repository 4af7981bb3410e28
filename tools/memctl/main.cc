// memctl: the operator's command line for memd. Parses, connects, runs one
// subcommand, and turns the outcome into an exit code (failure.h).

#include <signal.h>
#include <unistd.h>

#include <exception>
#include <iostream>
#include <new>
#include <span>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "memd/client.h"
#include "tools/memctl/cli.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_io.h"

namespace memd::memctl {
namespace {

absl::Status Dispatch(Client& client, const Invocation& invocation,
                      const Output& output) {
  switch (invocation.command) {
    case Command::kStats: return RunStats(client, output);
    case Command::kList:
      return RunList(client, invocation.prefix, !invocation.hide_unlinked, output);
    case Command::kInspect: return RunInspect(client, invocation.name, output);
    case Command::kSessions: return RunSessions(client, output);
    case Command::kUsage: return RunUsage(client, output);
    case Command::kAdvise: return RunAdvise(client, invocation.prefix, output);
    case Command::kLeaks: return RunLeaks(client, invocation.leaks, output);
    case Command::kTransfers: return RunTransfers(client, output);
    case Command::kPut: return RunPut(client, invocation.put, output);
    case Command::kGet: return RunGet(client, invocation.get, output);
    case Command::kUnlink: return RunUnlink(client, invocation.unlink, output);
    case Command::kPing: return RunPing(client, output);
    case Command::kTrim: return RunTrim(client, invocation.location, output);
    case Command::kDevices: return RunDevices(client, output);
    case Command::kCopy: return RunCopy(client, invocation.copy, output);
    case Command::kPrefetch:
      return RunPrefetch(client, invocation.name, invocation.location,
                         {.wait = invocation.wait, .wait_for_memory = invocation.wait_for_memory},
                         output);
    case Command::kDrop: return RunDrop(client, invocation.name, invocation.location, output);
  }
  return absl::InternalError("unknown subcommand");
}

// Why `invocation` must not run here, or empty: get without -o writes a
// buffer's bytes to stdout, which on a terminal garbles it and is rarely what
// was meant; `-o -` says it was (as curl's --output -). unlink -r asks before
// it unlinks, on a terminal; without one nobody could answer, and a script
// says --yes (rm -i's question, made safe for scripts).
std::string Refused(const Invocation& invocation, bool stdin_is_terminal,
                    bool stdout_is_terminal) {
  if (invocation.command == Command::kUnlink && invocation.unlink.recursive &&
      !invocation.yes && !stdin_is_terminal) {
    return "memctl: unlink -r: stdin is not a terminal, so nobody can confirm which "
           "buffers go; give --yes (-y) to unlink them without asking (memctl ls PREFIX "
           "shows what would go)";
  }
  if (invocation.command != Command::kGet || !invocation.get.output.empty() ||
      !stdout_is_terminal) {
    return "";
  }
  return absl::StrCat("memctl: get ", invocation.get.name,
                      ": stdout is a terminal, and the buffer's bytes would garble it; "
                      "give -o FILE, redirect stdout (memctl get NAME > FILE), or -o - "
                      "to write them to the terminal anyway");
}

// unlink -r's question: on stderr, the answer a line of stdin (a
// terminal: Refused saw to it). Only y or yes goes on.
bool AskOnTerminal(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  answer = absl::AsciiStrToLower(absl::StripAsciiWhitespace(answer));
  return answer == "y" || answer == "yes";
}

absl::Status Run(const Invocation& invocation) {
  // Empty: libmemd's choice (MEMD_SOCKET_DIR, else the user's own daemon,
  // else the system service's), and its error names what it tried.
  ConnectOptions connect;
  connect.socket_dir = invocation.socket_dir;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(connect);
  if (!client.ok()) {
    return Failed(invocation.socket_dir.empty()
                      ? std::string("connect to memd")
                      : absl::StrCat("connect to memd at ", invocation.socket_dir),
                  client.status());
  }
  if (invocation.command == Command::kStats && invocation.watch > absl::ZeroDuration()) {
    return RunStatsWatch(**client, invocation.watch, invocation.count,
                         Output{std::cout, invocation.json}, ::isatty(STDOUT_FILENO));
  }
  // The result is printed only when the command succeeds, so a failure
  // leaves stdout empty.
  std::ostringstream text;
  // Progress bars go to stderr, and only where a person watches it.
  std::ostream* progress = ::isatty(STDERR_FILENO) ? &std::cerr : nullptr;
  absl::Status status =
      Dispatch(**client, invocation, Output{text, invocation.json, progress, &std::cerr});
  // A partial failure's result stands (unlink of several names: those
  // that went), and is printed before the failure.
  if (!status.ok() && !IsPartial(status)) return status;
  const std::string result = text.str();
  absl::Status written = WriteAll(STDOUT_FILENO, std::as_bytes(std::span(result)), "stdout");
  return status.ok() ? written : status;
}

}  // namespace
}  // namespace memd::memctl

int main(int argc, char** argv) {
  using namespace memd::memctl;
  // A closed pipe on stdout (memctl ls | head -1) becomes an EPIPE error to
  // report, not a silent death by signal.
  ::signal(SIGPIPE, SIG_IGN);
  Invocation invocation;
  try {
    if (std::optional<int> exit_code =
            ParseCommandLine(argc, argv, invocation, std::cout, std::cerr)) {
      return *exit_code;
    }
    if (std::string refused =
            Refused(invocation, ::isatty(STDIN_FILENO), ::isatty(STDOUT_FILENO));
        !refused.empty()) {
      std::cerr << refused << '\n';
      return kExitUsage;
    }
    if (!invocation.yes) invocation.unlink.confirm = AskOnTerminal;
    absl::Status status = Run(invocation);
    if (status.ok()) return kExitOk;
    std::cerr << FailureLine(status, "failed") << '\n';
    return kExitFailed;
  } catch (const std::bad_alloc&) {
    std::cerr << "memctl: internal error: RESOURCE_EXHAUSTED: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "memctl: internal error: INTERNAL: " << e.what() << '\n';
  }
  return kExitFailed;
}
