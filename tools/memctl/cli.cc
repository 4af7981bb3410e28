#include "tools/memctl/cli.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/attrs.h"
#include "common/bytes.h"
#include "common/version.h"
#include "tools/memctl/cli_subcommands.h"
#include "tools/memctl/cli_values.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/format.h"
#include "tools/memctl/operand.h"

namespace memd::memctl {
namespace {

constexpr char kDescription[] =
    "memctl: look at and operate the local memd, the per-node memory broker.";

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
  memctl put --format safetensors m.safetensors
                                        a model's weights, named by file and header
  memctl cp w w/gpu1 --location device:1  copy a buffer; the daemon moves the bytes
  memctl cp ./w.bin w                   a path that exists, or starts with /, ./
                                        or ../, is a file; buf:NAME a buffer
  memctl prefetch w device:1            copy a buffer to a GPU ahead of its readers
  memctl leaks --older-than 1d          buffers and leases that look forgotten

Sizes (--size, --max-stream, --chunk-size) are bytes, or a number with a
unit in any case: KiB MiB GiB TiB, or the short K M G T, are 1024^n bytes;
kB MB GB TB are 1000^n (100MB = 100000000). Rates are decimal: GB/s, and
gb_per_s in --json, are 10^9 bytes per second.

--socket-dir and --json may come before or after the subcommand. The socket
directory is --socket-dir, else $MEMD_SOCKET_DIR; else memctl tries your own
daemon's ($XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID; /run/memd for root),
then /run/memd, the system service's. memctl talks only to a daemon it
trusts (root, yourself, the owner of a directory root made for memd); set
$MEMD_DAEMON_UID to the uid memd runs as when it is another user's.

Exit status: 0 success; 1 the operation failed (the reason is on stderr as
"memctl: <what>: <STATUS_CODE>: <message>"); 2 the command line was wrong.)";

void ReportUsageError(std::ostream& err, const std::string& message) {
  err << "memctl: usage: " << absl::StatusCodeToString(absl::StatusCode::kInvalidArgument)
      << ": " << message << "\n"
      << "Run 'memctl --help' or 'memctl SUBCOMMAND --help' for usage.\n";
}

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

// cp needs a buffer on one side (cp(1) copies files), and its JSON cannot
// share stdout with the bytes.
// Classifies the operands once (operand.h), for RunCopy.
std::optional<int> CheckCopyOperands(Invocation& invocation, std::ostream& err) {
  CopyCommandOptions& copy = invocation.copy;
  const Operand source = ClassifyOperand(copy.source);
  const Operand destination = ClassifyOperand(copy.destination);
  if (source.kind != Operand::Kind::kBuffer &&
      destination.kind != Operand::Kind::kBuffer) {
    ReportUsageError(err, absl::StrCat("cp needs a buffer name on one side; '", copy.source,
                                       "' and '", copy.destination,
                                       "' are files (paths that exist, or start with /, ./ "
                                       "or ../) or -; name a buffer buf:NAME, or use cp(1)"));
    return kExitUsage;
  }
  copy.source = source.text;
  copy.source_kind = source.kind;
  copy.destination = destination.text;
  copy.destination_kind = destination.kind;
  if (invocation.json && destination.kind == Operand::Kind::kStdio) {
    ReportUsageError(err,
                     "cp --json needs a DST other than -: the bytes and the JSON "
                     "result cannot share stdout");
    return kExitUsage;
  }
  return std::nullopt;
}

// unlink -r with an empty prefix would take every buffer the caller may
// unlink: as rm -r /, refused.
std::optional<int> CheckUnlinkOperands(const Invocation& invocation, std::ostream& err) {
  if (!invocation.unlink.recursive) return std::nullopt;
  for (const std::string& prefix : invocation.unlink.names) {
    if (prefix.empty()) {
      ReportUsageError(err, "unlink -r needs a non-empty PREFIX: an empty one would "
                            "unlink every buffer you may unlink");
      return kExitUsage;
    }
  }
  return std::nullopt;
}

// What the put command line held, beyond the values: how many operands
// (an empty one counts), and whether --max-stream was given at all.
struct PutGiven {
  int operands = 0;
  bool max_stream = false;
};

// put NAME FILE, or put --format safetensors FILE: the name then comes
// from the file, and with it the size and the attributes, so the options
// that set those are refused rather than ignored.
std::optional<int> CheckPutOperands(const OptionTexts& texts, const PutGiven& given,
                                    Invocation& invocation, std::ostream& err) {
  PutOptions& put = invocation.put;
  if (put.format.empty()) {
    if (given.operands < 2) {
      ReportUsageError(err, "put needs NAME and FILE (put --format safetensors takes "
                            "FILE alone)");
      return kExitUsage;
    }
    return std::nullopt;
  }
  // CLI11 hands the one operand to NAME, the first positional.
  if (given.operands > 1) {
    ReportUsageError(err, absl::StrCat("put --format safetensors takes FILE alone, not '",
                                       put.name, "' too: the buffer's name comes from the "
                                       "file (safetensors/<fingerprint>/<place>)"));
    return kExitUsage;
  }
  put.file = std::exchange(put.name, "");
  std::string refused;
  if (given.operands == 0) {
    refused = "needs FILE";
  } else if (put.file == "-") {
    refused = "reads a file, not stdin: the name comes from the file's stat and header, "
              "and the file is read twice";
  } else if (!texts.attrs.empty()) {
    refused = "takes no --attr: the buffer carries the format's six attributes, exactly";
  } else if (!texts.size.empty()) {
    refused = "takes no --size: the buffer's size is the file's";
  } else if (given.max_stream) {
    refused = "takes no --max-stream: it reads a regular file, never a stream";
  } else if (put.ephemeral) {
    refused = "takes no --ephemeral: the buffer stays for later callers until unlinked";
  }
  if (!refused.empty()) {
    ReportUsageError(err, absl::StrCat("put --format safetensors ", refused));
    return kExitUsage;
  }
  return std::nullopt;
}

// Turns the option texts into the invocation's values and checks what no
// single option's validator can. Returns kExitUsage after reporting a
// problem, std::nullopt when the command line is good.
std::optional<int> Finish(const OptionTexts& texts, bool watch_given, const PutGiven& put,
                          Invocation& invocation, std::ostream& err) {
  if (invocation.command == Command::kPut) {
    if (std::optional<int> refused = CheckPutOperands(texts, put, invocation, err)) {
      return refused;
    }
  }
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
  for (const std::string& text : texts.attrs) {
    absl::StatusOr<std::pair<std::string, std::string>> attr = ParseAttr(text);
    if (!attr.ok()) {
      ReportUsageError(err, absl::StrCat("--attr: ", attr.status().message()));
      return kExitUsage;
    }
    if (!invocation.put.attrs.insert(*attr).second) {
      ReportUsageError(err, absl::StrCat("--attr ", attr->first, " is given twice"));
      return kExitUsage;
    }
  }
  if (!texts.size.empty()) invocation.put.size = ParseBytes(texts.size).value_or(0);
  invocation.put.max_stream_bytes =
      ParseBytes(texts.max_stream).value_or(kDefaultMaxStreamBytes);
  invocation.get.wait = absl::Seconds(ParseWait(texts.wait).value_or(0));
  invocation.wait = invocation.get.wait;
  if (invocation.command == Command::kPrefetch) {
    invocation.wait = absl::Seconds(ParseWait(texts.prefetch_wait).value_or(0));
  }
  if (!texts.owner.empty()) invocation.get.owner = ParseUser(texts.owner);
  invocation.leaks.older_than = ParseDurationText(texts.older_than).value_or(absl::Hours(1));
  invocation.wait_for_memory = absl::Seconds(ParseWait(texts.wait_for_memory).value_or(0));
  invocation.put.wait_for_memory = invocation.get.wait_for_memory = invocation.wait_for_memory;
  invocation.copy.wait_for_memory = invocation.wait_for_memory;
  if (invocation.command == Command::kGet && invocation.get.location.empty() &&
      invocation.wait_for_memory > absl::ZeroDuration()) {
    ReportUsageError(err, "--wait-for-memory needs --location: only a copy made there may "
                          "wait for memory");
    return kExitUsage;
  }

  TransferFlags transfer;
  transfer.priority = ParsePriority(texts.priority).value_or(Priority::kNormal);
  if (!texts.chunk_size.empty()) transfer.chunk_bytes = ParseBytes(texts.chunk_size).value_or(0);
  if (!texts.timeout.empty()) {
    transfer.timeout = absl::Seconds(ParseWait(texts.timeout).value_or(kMaxWaitSeconds));
  }
  transfer.direct_io = texts.direct_io      ? DirectIoMode::kAlways
                       : texts.no_direct_io ? DirectIoMode::kNever
                                            : DirectIoMode::kAuto;
  if (!texts.read_threads.empty()) {
    transfer.read_threads = ParseReadThreads(texts.read_threads).value_or(0);
  }
  transfer.cache = ParseCachePolicy(texts.cache).value_or(CachePolicy::kKeep);
  invocation.put.transfer = invocation.get.transfer = invocation.copy.transfer = transfer;
  FileOptions files;
  files.follow_symlinks = texts.follow_symlinks;
  files.fifo_timeout = absl::Seconds(
      ParseWait(texts.fifo_timeout).value_or(absl::ToDoubleSeconds(kDefaultFifoTimeout)));
  invocation.put.files = invocation.get.files = invocation.copy.files = files;
  CopyCommandOptions& copy = invocation.copy;
  copy.mode = invocation.put.mode;
  copy.size = invocation.put.size;
  copy.max_stream_bytes = invocation.put.max_stream_bytes;
  copy.wait = invocation.get.wait;
  copy.owner = invocation.get.owner;
  copy.seal = !texts.no_seal;
  if (invocation.command == Command::kCopy) {
    if (std::optional<int> refused = CheckCopyOperands(invocation, err)) return refused;
  }

  if (invocation.command == Command::kUnlink) {
    if (std::optional<int> refused = CheckUnlinkOperands(invocation, err)) return refused;
  }
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

std::vector<std::pair<CLI::App*, Command>> DeclareCommandLine(CLI::App& app,
                                                             Invocation& invocation,
                                                             OptionTexts& texts) {
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

  std::vector<std::pair<CLI::App*, Command>> declared;
  for (const Subcommand& subcommand : Subcommands()) {
    declared.emplace_back(subcommand.declare(app, invocation, texts),
                          subcommand.command);
  }
  return declared;
}

std::unique_ptr<CLI::App> MakeCommandLineApp() {
  // The App, and what its options fill (they hold references to it).
  struct BoundApp : CLI::App {
    BoundApp() : CLI::App(kDescription, "memctl") {
      DeclareCommandLine(*this, invocation, texts);
    }
    Invocation invocation;
    OptionTexts texts;
  };
  return std::make_unique<BoundApp>();
}

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err) {
  CLI::App app(kDescription, "memctl");
  OptionTexts texts;
  std::vector<std::pair<CLI::App*, Command>> declared =
      DeclareCommandLine(app, invocation, texts);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e, out, err);
  }
  bool watch_given = false;
  PutGiven put;
  for (const auto& [sub, command] : declared) {
    if (!sub->parsed()) continue;
    invocation.command = command;
    watch_given = command == Command::kStats && sub->count("--watch") > 0;
    if (command == Command::kPut) {
      put.operands = static_cast<int>(sub->count("NAME") + sub->count("FILE"));
      put.max_stream = sub->count("--max-stream") > 0;
    }
  }
  return Finish(texts, watch_given, put, invocation, err);
}

}  // namespace memd::memctl
