#include "tools/memctl/cli.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/version.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/format.h"

namespace memd::memctl {
namespace {

// --wait beyond a day is almost surely a typo (milliseconds?), and an
// unbounded wait would overflow the call deadline.
constexpr double kMaxWaitSeconds = 86400;

constexpr char kMainFooter[] = R"(Examples:
  memctl stats                          pools, buffers, sessions at a glance
  memctl --json stats | jq '.pools[] | select(.location == "host")'
  memctl ls frames/                     buffers whose names start with frames/
  memctl inspect frames/0               everything the daemon knows about one
  memctl usage                          what your buffers take, against your quota
  memctl put models/weights w.bin       publish a file as a sealed buffer
  memctl get frames/0 -o frame.raw      copy a buffer's bytes into a file
  memctl --socket-dir /run/memd ping    is the daemon there?
  memctl trim host                      give idle host memory back now
  memctl devices                        the GPUs memd serves
  memctl put --location device:0 w w.bin  publish a file into GPU memory

--socket-dir and --json may come before or after the subcommand. The socket
directory is --socket-dir, else $MEMD_SOCKET_DIR, else /run/memd for root,
$XDG_RUNTIME_DIR/memd, or /tmp/memd-$UID. memctl talks only to a daemon it
trusts (root, yourself, the owner of a directory root made for memd); set
$MEMD_DAEMON_UID to the uid memd runs as when it is another user's.

Exit status: 0 success; 1 the operation failed (the reason is on stderr as
"memctl: <what>: <STATUS_CODE>: <message>"); 2 the command line was wrong.)";

// "0600", "640", "0" -> permission bits; the daemon decides which it takes.
std::optional<std::uint32_t> ParseMode(const std::string& text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  std::uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (mode > 07777) return std::nullopt;
  return mode;
}

std::optional<double> ParseWait(const std::string& text) {
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > kMaxWaitSeconds) {
    return std::nullopt;
  }
  return seconds;
}

CLI::Validator ModeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseMode(text).has_value()) return "";
        return absl::StrCat("'", text,
                            "' is not octal permission bits like 0600 or 0640");
      },
      "");
}

CLI::Validator UserValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseUser(text).has_value()) return "";
        return absl::StrCat("'", text, "' is neither a uid nor a known user name");
      },
      "");
}

CLI::Validator SizeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<std::uint64_t> bytes = ParseBytes(text);
        if (bytes.ok() && *bytes > 0) return "";
        return absl::StrCat("'", text,
                            "' is not a size of at least 1 byte like 4096, 64KiB or 2GiB");
      },
      "");
}

CLI::Validator WaitValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseWait(text).has_value()) return "";
        return absl::StrCat("'", text, "' is not a number of seconds from 0 to ",
                            kMaxWaitSeconds);
      },
      "");
}

// `summary` is the one line in the main help; `details` (may be empty) and
// `examples` close the subcommand's own help.
CLI::App* AddSubcommand(CLI::App& app, const std::string& name,
                        const std::string& summary, const std::string& details,
                        const std::string& examples, bool& json) {
  CLI::App* sub = app.add_subcommand(name, summary);
  sub->footer(absl::StrCat(details, details.empty() ? "" : "\n\n", "Examples:\n",
                           examples));
  // Also here, not only on the main command, so `memctl stats --json` works
  // and each subcommand's help lists it.
  sub->add_flag("--json", json, "Print JSON (snake_case fields) instead of text");
  return sub;
}

void ReportUsageError(std::ostream& err, const std::string& message) {
  err << "memctl: usage: " << absl::StatusCodeToString(absl::StatusCode::kInvalidArgument)
      << ": " << message << "\n"
      << "Run 'memctl --help' or 'memctl SUBCOMMAND --help' for usage.\n";
}

// Options whose text is checked by a validator during the parse and
// converted after it.
struct OptionTexts {
  std::string watch;
  std::string mode = "0600";
  std::string size;
  std::string max_stream = "1GiB";
  std::string wait = "0";
  std::string owner;
};

CLI::App* DeclareStats(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* stats = AddSubcommand(
      app, "stats",
      "Daemon version, backend, counts, and pool usage per location",
      "Pools: RESERVED is what the pool holds from the backend, USED what\n"
      "buffers occupy, PEAK the most it ever reserved, LARGEST FREE its\n"
      "largest free block, FRAG 1 - largest free / free, LIMIT the most it may\n"
      "reserve; a HIT is an allocation served without asking the backend, a\n"
      "MISS one that had to. --json adds per-size-class counts.",
      "  memctl stats\n"
      "  memctl stats --watch          # redraw every 2 s until Ctrl-C\n"
      "  memctl stats --watch 0.5 --count 10\n"
      "  memctl stats --json | jq '.pools[].used_bytes'\n"
      "  memctl stats --watch 5 --json # one JSON object per line\n",
      invocation.json);
  stats->add_option("--watch", texts.watch,
                    "Redraw a compact view every SECONDS (default 2) until interrupted")
      ->expected(0, 1)
      ->type_name("[SECONDS]");
  stats->add_option("--count", invocation.count, "With --watch: stop after N views")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  return stats;
}

CLI::App* DeclareList(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* ls = AddSubcommand(
      app, "ls", "List the buffers you may read, by name", "",
      "  memctl ls\n"
      "  memctl ls frames/\n"
      "  memctl ls --json | jq -r '.[].name'\n",
      invocation.json);
  ls->add_option("PREFIX", invocation.prefix, "Only names that start with this")
      ->type_name("");
  return ls;
}

CLI::App* DeclareInspect(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* inspect = AddSubcommand(
      app, "inspect", "Show everything the daemon knows about one buffer", "",
      "  memctl inspect frames/0\n"
      "  memctl inspect frames/0 --json | jq .state\n",
      invocation.json);
  inspect->add_option("NAME", invocation.name, "Buffer name")->required()->type_name("");
  return inspect;
}

CLI::App* DeclareSessions(CLI::App& app, Invocation& invocation, OptionTexts&) {
  return AddSubcommand(
      app, "sessions",
      "List the processes connected to memd (this memctl included)",
      "Yours, or everyone's as root. CREATED is the memory live buffers the\n"
      "session created take, which max_session_bytes bounds per location.",
      "  memctl sessions\n"
      "  memctl sessions --json | jq '.[] | select(.lease_count > 0)'\n",
      invocation.json);
}

CLI::App* DeclareUsage(CLI::App& app, Invocation& invocation, OptionTexts&) {
  return AddSubcommand(
      app, "usage",
      "Show what live buffers take per user and location, against the quota",
      "One row per user and location holding buffers: your own (every user's\n"
      "when run as root). QUOTA is max_uid_bytes there (- when none). A buffer\n"
      "counts the memory the pool sets aside for it (at least a page; a 2 MiB\n"
      "granule on a GPU), not its size, until that memory is freed.",
      "  memctl usage\n"
      "  sudo memctl usage --json | jq '.[] | select(.quota_bytes > 0)'\n",
      invocation.json);
}

CLI::App* DeclarePut(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* put = AddSubcommand(
      app, "put",
      "Publish a file's bytes as a new sealed, persistent buffer",
      "Creates NAME with the file's size, writes the bytes and seals it. FILE\n"
      "may be - (stdin) or a pipe: with --size its bytes go straight into the\n"
      "buffer and the stream must hold exactly that many (a device such as\n"
      "/dev/zero gives its first BYTES); without, it is read to the end first,\n"
      "up to --max-stream. Empty files are refused: a buffer holds at least 1\n"
      "byte. On failure no buffer is left.",
      "  memctl put models/weights weights.bin\n"
      "  memctl put --mode 0640 shared/table table.csv\n"
      "  producer | memctl put frames/0 -\n"
      "  producer | memctl put --size 8GiB frames/big -\n"
      "  memctl put --size 1GiB scratch /dev/zero\n",
      invocation.json);
  put->add_option("NAME", invocation.put.name, "Buffer name")->required()->type_name("");
  put->add_option("FILE", invocation.put.file, "File to read; - reads stdin")
      ->required()
      ->type_name("");
  put->add_option("--mode", texts.mode, "Permission bits, octal")
      ->check(ModeValidator())
      ->type_name("OCTAL")
      ->capture_default_str();
  put->add_option("--size", texts.size,
                  "The buffer's size: stream FILE straight into it (pipes: exactly "
                  "this many bytes)")
      ->check(SizeValidator())
      ->type_name("BYTES");
  put->add_option("--max-stream", texts.max_stream,
                  "Without --size, the most bytes collected from a pipe")
      ->check(SizeValidator())
      ->type_name("BYTES")
      ->capture_default_str();
  put->add_option("--location", invocation.put.location,
                  "Where the memory lives: host, pinned, device:N (device "
                  "buffers are written through the CUDA driver)")
      ->type_name("LOCATION")
      ->capture_default_str();
  return put;
}

CLI::App* DeclareGet(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* get = AddSubcommand(
      app, "get",
      "Copy a sealed buffer's bytes to stdout or a file",
      "With --json, -o is required: the bytes cannot share stdout with the JSON.\n"
      "Whoever may connect to memd can create a name first: to accept only the\n"
      "buffer your producer made, name it with --owner (a buffer of that name\n"
      "owned by anyone else is PERMISSION_DENIED, also one sealed while get\n"
      "waits).",
      "  memctl get frames/0 > frame.raw\n"
      "  memctl get frames/0 -o frame.raw\n"
      "  memctl get --wait 10 frames/1 -o next.raw   # wait for the producer's seal\n"
      "  memctl get --wait 10 --owner camera frames/1 -o next.raw  # from user camera only\n",
      invocation.json);
  get->add_option("NAME", invocation.get.name, "Buffer name")->required()->type_name("");
  get->add_option("-o,--output", invocation.get.output,
                  "Write to FILE instead of stdout")
      ->type_name("FILE");
  get->add_option("--wait", texts.wait,
                  "Wait up to this long for the buffer to exist and be sealed")
      ->check(WaitValidator())
      ->type_name("SECONDS")
      ->capture_default_str();
  get->add_option("--owner", texts.owner,
                  "Accept the buffer only if this user (name or uid) owns it")
      ->check(UserValidator())
      ->type_name("USER");
  return get;
}

CLI::App* DeclareUnlink(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* unlink = AddSubcommand(
      app, "unlink",
      "Remove a buffer's name; its memory goes when the last lease ends", "",
      "  memctl unlink frames/0\n",
      invocation.json);
  unlink->add_option("NAME", invocation.name, "Buffer name")->required()->type_name("");
  return unlink;
}

CLI::App* DeclarePing(CLI::App& app, Invocation& invocation, OptionTexts&) {
  return AddSubcommand(app, "ping", "Check that memd answers, and how fast", "",
                       "  memctl ping\n"
                       "  memctl --socket-dir /run/memd ping\n",
                       invocation.json);
}

CLI::App* DeclareDevices(CLI::App& app, Invocation& invocation, OptionTexts&) {
  return AddSubcommand(
      app, "devices", "List the GPUs memd serves",
      "Ordinal, name, UUID, memory, whether the device supports virtual memory\n"
      "management and POSIX fd export, and which handles memd hands out for it\n"
      "(vmm_fd, or legacy ipc). Empty with the host backend.",
      "  memctl devices\n"
      "  memctl devices --json | jq '.[].free_bytes'\n",
      invocation.json);
}

CLI::App* DeclareTrim(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* trim = AddSubcommand(
      app, "trim", "Give idle pool memory back to the system now",
      "Every segment of the pool (or of all pools) that holds no live buffer\n"
      "goes back to the system; the daemon does this by itself for segments\n"
      "idle longer than pool_trim_idle_seconds. Root or the daemon's user only.",
      "  memctl trim\n"
      "  memctl trim host\n"
      "  memctl trim --json\n",
      invocation.json);
  trim->add_option("LOCATION", invocation.location,
                   "One pool: host, pinned, device:N (default: all)")
      ->type_name("");
  return trim;
}

// The subcommands, in the order the main help lists them.
struct Subcommand {
  CLI::App* (*declare)(CLI::App&, Invocation&, OptionTexts&);
  Command command;
};
constexpr Subcommand kSubcommands[] = {
    {DeclareStats, Command::kStats},       {DeclareList, Command::kList},
    {DeclareInspect, Command::kInspect},   {DeclareSessions, Command::kSessions},
    {DeclareUsage, Command::kUsage},       {DeclarePut, Command::kPut},
    {DeclareGet, Command::kGet},           {DeclareUnlink, Command::kUnlink},
    {DeclarePing, Command::kPing},         {DeclareDevices, Command::kDevices},
    {DeclareTrim, Command::kTrim},
};

// Reports why CLI11 refused the command line. Returns the exit code.
int ReportParseError(CLI::App& app, const CLI::ParseError& e, std::ostream& out,
                     std::ostream& err) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    app.exit(e, out, err);  // --help, --version.
    return kExitOk;
  }
  // "A subcommand is required" misleads when one was given but misspelt.
  std::vector<std::string> extra = app.remaining();
  if (app.get_subcommands().empty() && !extra.empty() && !extra.front().empty()) {
    ReportUsageError(err, absl::StrCat(extra.front()[0] == '-' ? "unknown option '"
                                                               : "unknown subcommand '",
                                       extra.front(), "'"));
  } else {
    ReportUsageError(err, e.what());
  }
  return kExitUsage;
}

// Turns the option texts into the invocation's values and checks what no
// single option's validator can. Returns kExitUsage after reporting a
// problem, std::nullopt when the command line is good.
std::optional<int> Finish(const OptionTexts& texts, bool watch_given,
                          Invocation& invocation, std::ostream& err) {
  if (watch_given) {
    double seconds = 2;
    if (!texts.watch.empty() &&
        (!absl::SimpleAtod(texts.watch, &seconds) || !(seconds > 0) || seconds > 86400)) {
      ReportUsageError(err, absl::StrCat("--watch takes SECONDS above 0 and at most "
                                         "86400, not '", texts.watch, "'"));
      return kExitUsage;
    }
    invocation.watch = absl::Seconds(seconds);
  } else if (invocation.count > 0) {
    ReportUsageError(err, "--count goes with --watch");
    return kExitUsage;
  }
  // The validators accepted these texts.
  invocation.put.mode = ParseMode(texts.mode).value_or(0600);
  if (!texts.size.empty()) invocation.put.size = ParseBytes(texts.size).value_or(0);
  invocation.put.max_stream_bytes =
      ParseBytes(texts.max_stream).value_or(kDefaultMaxStreamBytes);
  invocation.get.wait = absl::Seconds(ParseWait(texts.wait).value_or(0));
  if (!texts.owner.empty()) invocation.get.owner = ParseUser(texts.owner);

  if (invocation.command == Command::kGet && invocation.json &&
      (invocation.get.output.empty() || invocation.get.output == "-")) {
    ReportUsageError(err,
                     "get --json needs -o FILE: the buffer's bytes and the JSON "
                     "result cannot share stdout");
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err) {
  CLI::App app("memctl: look at and operate the local memd, the per-node "
               "memory broker.",
               "memctl");
  // Options of the main command are accepted after the subcommand too.
  app.fallthrough();
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("memctl ") + kVersion);
  app.add_option("--socket-dir", invocation.socket_dir,
                 "Directory of memd's sockets (memd.sock, session.sock)")
      ->envname("MEMD_SOCKET_DIR")
      ->type_name("DIR");
  app.add_flag("--json", invocation.json,
               "Print JSON (snake_case fields) instead of text");
  app.footer(kMainFooter);

  OptionTexts texts;
  std::vector<std::pair<CLI::App*, Command>> declared;
  for (const Subcommand& subcommand : kSubcommands) {
    declared.emplace_back(subcommand.declare(app, invocation, texts),
                          subcommand.command);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e, out, err);
  }
  bool watch_given = false;
  for (const auto& [sub, command] : declared) {
    if (!sub->parsed()) continue;
    invocation.command = command;
    watch_given = command == Command::kStats && sub->count("--watch") > 0;
  }
  return Finish(texts, watch_given, invocation, err);
}

}  // namespace memd::memctl
