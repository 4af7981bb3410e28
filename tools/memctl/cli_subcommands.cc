#include "tools/memctl/cli_subcommands.h"

#include <string>

#include "tools/memctl/cli_values.h"
#include "tools/memctl/format.h"

namespace memd::memctl {
namespace {

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

// --wait-for-memory of put, get, cp and prefetch: `when` says when it waits.
void AddWaitForMemory(CLI::App* sub, OptionTexts& texts, const std::string& when) {
  sub->add_option("--wait-for-memory", texts.wait_for_memory,
                  absl::StrCat(when, " (once what may give way has), wait this long for "
                                     "memory instead of failing (30s, 5m; 0: fail at once)"))
      ->check(WaitValidator())
      ->type_name("DURATION")
      ->capture_default_str();
}

// What every command that opens files named on its command line takes:
// `writes_files` for get and cp (a file as the output).
void AddFileOptions(CLI::App* sub, OptionTexts& texts, bool writes_files) {
  sub->add_option("--fifo-timeout", texts.fifo_timeout,
                  "How long to wait for the other end of a FIFO named as a file (its "
                  "writer, or its reader) before failing; memctl never blocks in open")
      ->check(TimeoutValidator())
      ->type_name("SECONDS")
      ->capture_default_str();
  if (writes_files) {
    sub->add_flag("--follow-symlinks", texts.follow_symlinks,
                  "Write through a symbolic link at the output path; without it a link "
                  "there is refused, since whoever may write its directory could point "
                  "it at a file of yours");
  }
}

// What every command that has the daemon copy bytes takes.
void AddTransferOptions(CLI::App* sub, OptionTexts& texts, bool reads_files) {
  sub->add_option("--priority", texts.priority,
                  absl::StrCat("The daemon serves copies ", kPriorities,
                               " first, at chunk boundaries"))
      ->check(PriorityValidator())
      ->type_name("LEVEL")
      ->capture_default_str();
  sub->add_option("--chunk-size", texts.chunk_size,
                  "Bytes per chunk the daemon copies: 1 MiB up to its staging slot "
                  "(16 MiB by default; default chunk 4 MiB)")
      ->check(SizeValidator())
      ->type_name("BYTES");
  sub->add_option("--timeout", texts.timeout,
                  "Fail with DEADLINE_EXCEEDED unless the copy is done this many "
                  "seconds after it began (the daemon stops it too)")
      ->check(TimeoutValidator())
      ->type_name("SECONDS");
  if (reads_files) {
    CLI::Option* direct = sub->add_flag(
        "--direct-io", texts.direct_io,
        "Read a file for a device buffer with O_DIRECT, around the page cache, and fail "
        "where its filesystem refuses that (ramfs; tmpfs before Linux 6.6). Default: "
        "O_DIRECT where the filesystem allows it, unless the page cache holds the "
        "file's start");
    CLI::Option* no_direct = sub->add_flag(
        "--no-direct-io", texts.no_direct_io,
        "Read a file for a device buffer through the page cache, not with O_DIRECT");
    direct->excludes(no_direct);
    sub->add_option("--read-threads", texts.read_threads,
                    "Threads reading a regular file, each taking the next 8 MiB piece "
                    "(1 to 16; default: one per CPU memctl may use, at most 8)")
        ->check(ReadThreadsValidator())
        ->type_name("N");
    sub->add_option("--cache", texts.cache,
                    "What reading a regular file leaves in the page cache: keep its pages, "
                    "or drop them behind the reads (posix_fadvise DONTNEED), so that a "
                    "large file does not push out the rest; drop also drops pages of "
                    "the file that were cached before")
        ->check(CachePolicyValidator())
        ->type_name("keep|drop")
        ->capture_default_str();
  }
}

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
      app, "ls", "List the buffers you may read, by name",
      "A buffer that was unlinked while leased keeps its memory until its last\n"
      "lease ends: it is listed too, after any buffer that took its name since,\n"
      "with STATE \"unlinked, N leases\" (in --json, \"unlinked\": true), so that\n"
      "what holds memory is never hidden. memctl sessions shows who holds leases;\n"
      "--no-unlinked leaves these out.",
      "  memctl ls\n"
      "  memctl ls frames/\n"
      "  memctl ls --json | jq -r '.[] | select(.unlinked | not) | .name'\n"
      "  memctl ls --no-unlinked\n",
      invocation.json);
  ls->add_option("PREFIX", invocation.prefix, "Only names that start with this")
      ->type_name("");
  ls->add_flag("--no-unlinked", invocation.hide_unlinked,
               "Leave out buffers that were unlinked but are still leased");
  return ls;
}

CLI::App* DeclareInspect(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* inspect = AddSubcommand(
      app, "inspect", "Show everything the daemon knows about one buffer",
      "A buffer put with --format safetensors (attribute format=safetensors)\n"
      "also shows its tensors (name, dtype, shape, byte offset in the buffer,\n"
      "bytes) and metadata, parsed from the buffer's own header (a device\n"
      "buffer's is copied out by the daemon); --json adds tensors[] and\n"
      "metadata, or tensors_error when the header cannot be read.",
      "  memctl inspect frames/0\n"
      "  memctl inspect frames/0 --json | jq .state\n"
      "  memctl inspect --json safetensors/0123abcd.../device-0 | jq '.tensors[].name'\n",
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

CLI::App* DeclareTransfers(CLI::App& app, Invocation& invocation, OptionTexts&) {
  return AddSubcommand(
      app, "transfers", "List the copies queued or running in the daemon",
      "Yours, or everyone's as root, oldest first: each copy's id, state and\n"
      "priority, the buffers it reads and writes (NAME@LOCATION, +OFFSET when\n"
      "the range does not start at the first byte), its direction and GPU,\n"
      "the bytes moved so far, how long ago it was asked for, and the session\n"
      "that started it. A copy that ended is gone from the list. At most 1000\n"
      "are shown; the last line says how many more there are.",
      "  memctl transfers\n"
      "  memctl transfers --json | jq '.transfers[] | select(.progress.state == \"queued\")'\n",
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

CLI::App* DeclareAdvise(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* advise = AddSubcommand(
      app, "advise", "Recommend prefetches, moves, replicas to drop and buffers to unlink",
      "From what memd counted of your buffers' use (every buffer's as root),\n"
      "grouped by name up to the last '/': one line each, the numbers behind\n"
      "it, then what to do and the bytes it would copy or free. Nothing is\n"
      "changed: each line is a suggestion to act on.",
      "  memctl advise\n"
      "  memctl advise weights/\n"
      "  memctl advise --json | jq '.[] | select(.action == \"unlink\")'\n",
      invocation.json);
  advise->add_option("PREFIX", invocation.prefix, "Only names that start with this")
      ->type_name("");
  return advise;
}

CLI::App* DeclareLeaks(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* leaks = AddSubcommand(
      app, "leaks",
      "List memory that looks forgotten: unopened or unsealed buffers, old leases",
      "Your buffers, leases and sessions (every user's as root): persistent\n"
      "sealed buffers nobody opened since they were created, buffers still not\n"
      "sealed, and leases held, each at least --older-than old; sessions holding\n"
      "at least --many-leases leases. One row each with the numbers: BYTES as the\n"
      "pools count them (every copy of a buffer), AGE since creation or grant,\n"
      "PID of the creator or holder. memd cannot see mapped bytes being used:\n"
      "an old lease may be busy; the report says what memd knows. At most 4096\n"
      "rows; a last line counts the rest. The metrics memd_leaks{kind} and\n"
      "memd_leak_bytes{kind} carry the totals (everyone's, with the defaults).",
      "  memctl leaks\n"
      "  memctl leaks --older-than 7d\n"
      "  memctl leaks --older-than 0 --many-leases 100   # everything, however young\n"
      "  sudo memctl leaks --json | jq '.leaks[] | select(.kind == \"idle_lease\")'\n",
      invocation.json);
  leaks->add_option("--older-than", texts.older_than,
                    "Buffers and leases younger than this are not listed: seconds, or "
                    "with a unit (30s, 90m, 1h, 7d)")
      ->check(OlderThanValidator())
      ->type_name("DURATION")
      ->capture_default_str();
  leaks->add_option("--many-leases", invocation.leaks.many_leases,
                    "A session holding at least this many leases is listed")
      ->check(CLI::PositiveNumber)
      ->type_name("N")
      ->capture_default_str();
  return leaks;
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
      "byte. On failure no buffer is left. A FIFO is opened without blocking:\n"
      "memctl waits up to --fifo-timeout for its writer, then reads as from a pipe.\n\n"
      "Device buffers (--location device:N) are filled by memd's transfer\n"
      "engine: --read-threads threads (default one per CPU, at most 8) read a\n"
      "regular file in 8 MiB pieces into slices of a staging buffer of memctl's\n"
      "own (pinned memory where memd has it; 8 x 32 MiB at most), while the\n"
      "daemon copies the slices read before to the GPU. The file is never all\n"
      "in memory. Reads use O_DIRECT where the filesystem allows it and the page\n"
      "cache does not hold the file's start (--direct-io: always, or fail;\n"
      "--no-direct-io: never); --cache drop drops the file's pages behind the\n"
      "reads. --json says which (file_io: direct or buffered). A host or pinned\n"
      "buffer is written through its descriptor (file_io: sendfile). On a\n"
      "terminal a progress bar shows on stderr.\n\n"
      "put --format safetensors FILE (no NAME): checks the file's header, then\n"
      "puts the whole file in the persistent buffer\n"
      "safetensors/<fingerprint>/<place> (place: host, pinned or device-N), with\n"
      "the attributes format, safetensors.fingerprint, .file_size, .mtime_ns,\n"
      ".header_bytes and .file. The fingerprint covers the file's stat (device,\n"
      "inode, size, mtime, ctime) and header, so a changed file gets a new name;\n"
      "a file that changes while it loads fails the put and leaves no buffer. A\n"
      "sealed buffer of that name holding this file (yours or root's) is\n"
      "reported as already loaded. memctl inspect shows the tensors. The name is\n"
      "printed (--json: .name). Not with --attr, --size, --max-stream,\n"
      "--ephemeral or FILE - (docs/safetensors.md).",
      "  memctl put models/weights weights.bin\n"
      "  memctl put --mode 0640 shared/table table.csv\n"
      "  producer | memctl put frames/0 -\n"
      "  producer | memctl put --size 8GiB frames/big -\n"
      "  memctl put --size 1GiB scratch /dev/zero\n"
      "  memctl put --location device:0 --priority critical model/w w.bin\n"
      "  memctl put --location device:0 --json model/w w.bin | jq .gb_per_s\n"
      "  memctl put --location device:0 --direct-io --cache drop model/w /nvme/w.bin\n"
      "  memctl put --attr dtype=float32 --attr shape=1024,1024 model/w w.bin\n"
      "  memctl put --format safetensors --location device:0 --mode 0644 model.safetensors\n"
      "  memctl put --format safetensors --json model.safetensors | jq -r .name\n",
      invocation.json);
  put->add_option("NAME", invocation.put.name,
                  "Buffer name (not with --format safetensors, which derives it)")
      ->type_name("");
  put->add_option("FILE", invocation.put.file, "File to read; - reads stdin")
      ->type_name("");
  put->add_option("--format", invocation.put.format,
                  "safetensors: FILE is a safetensors file; its header is checked "
                  "first, and the buffer is named and described by it (see below)")
      ->check(FormatValidator())
      ->type_name("FORMAT");
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
                  "buffers are filled by the daemon's transfer engine), or auto: "
                  "memd chooses from the size, --hint and free memory, among the "
                  "locations this process can map (inspect shows why)")
      ->type_name("LOCATION")
      ->capture_default_str();
  put->add_option("--hint", invocation.put.hint,
                  "With --location auto: device_frequent, host_frequent, "
                  "read_mostly or streaming")
      ->type_name("HINT");
  put->add_option("--retention", invocation.put.retention,
                  "What memd may take back when the location is full and nobody "
                  "holds the buffer: pinned (nothing), demotable (its copies away "
                  "from home) or evictable (also the buffer itself)")
      ->check(CLI::IsMember({"pinned", "demotable", "evictable"}))
      ->type_name("RETENTION")
      ->capture_default_str();
  put->add_option("--numa", invocation.put.numa,
                  "Host and pinned: the NUMA node to bind the pages to: off, auto (a "
                  "pinned buffer's GPU's node, else this process's) or a node number "
                  "(default: the daemon's numa setting)")
      ->type_name("auto|off|N");
  AddWaitForMemory(put, texts, "When the location is full");
  put->add_option("--attr", texts.attrs,
                  "An attribute the buffer carries for its readers, KEY=VALUE; "
                  "repeat for more (at most 16: dtype=float16, shape=4096,4096)")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
  put->add_flag("--ephemeral", invocation.put.ephemeral,
                "The buffer goes with its last lease: hand it to readers already "
                "waiting for it (memctl's own lease ends when it exits)");
  AddTransferOptions(put, texts, /*reads_files=*/true);
  AddFileOptions(put, texts, /*writes_files=*/false);
  return put;
}

CLI::App* DeclareGet(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* get = AddSubcommand(
      app, "get",
      "Copy a sealed buffer's bytes to stdout or a file",
      "Without -o the bytes go to stdout, but not to a terminal (they would\n"
      "garble it): there get exits 2 unless told -o - (as curl).\n"
      "With --json, -o is required: the bytes cannot share stdout with the JSON.\n"
      "-o FILE is never followed when it is a symbolic link (--follow-symlinks\n"
      "does), a FIFO there waits up to --fifo-timeout for its reader, and an\n"
      "existing file is emptied only once memctl has the first bytes for it: a\n"
      "get that fails before then leaves the file as it was.\n"
      "Whoever may connect to memd can create a name first: to accept only the\n"
      "buffer your producer made, name it with --owner (a buffer of that name\n"
      "owned by anyone else is PERMISSION_DENIED, also one sealed while get\n"
      "waits).\n\n"
      "Device buffers come through memd's transfer engine and a staging buffer\n"
      "of memctl's own, slice by slice; on a terminal a progress bar shows on\n"
      "stderr.",
      "  memctl get frames/0 > frame.raw\n"
      "  memctl get frames/0 -o frame.raw\n"
      "  memctl get --wait 10 frames/1 -o next.raw   # wait for the producer's seal\n"
      "  memctl get --wait 10 --owner camera frames/1 -o next.raw  # from user camera only\n"
      "  memctl get --location device:1 w -o w.bin  # through (or making) its device:1 copy\n",
      invocation.json);
  get->add_option("NAME", invocation.get.name, "Buffer name")->required()->type_name("");
  get->add_option("-o,--output", invocation.get.output,
                  "Write to FILE instead of stdout (-: stdout, a terminal too)")
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
  get->add_option("--location", invocation.get.location,
                  "Read the buffer's copy at host, pinned or device:N (memd makes one "
                  "there, charged to you, where there is none); default: its home")
      ->type_name("LOCATION");
  AddWaitForMemory(get, texts, "When --location is full for the copy");
  AddTransferOptions(get, texts, /*reads_files=*/false);
  AddFileOptions(get, texts, /*writes_files=*/true);
  return get;
}

CLI::App* DeclareCopy(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CopyCommandOptions& copy = invocation.copy;
  CLI::App* cp = AddSubcommand(
      app, "cp", "Copy between buffers and files; the daemon moves buffers' bytes",
      "Which operand is what, in this order: - is stdin or stdout; buf:NAME is\n"
      "the buffer NAME; one starting with /, ./ or ../ (no buffer name can), or\n"
      "a path that exists, is a file; anything else names a buffer. So write a\n"
      "new file as ./NAME, and a buffer whose name is also a path here as\n"
      "buf:NAME. One side must be a buffer.\n"
      "\n"
      "buffer -> buffer: memd's transfer engine copies (host or device on\n"
      "either side). When DST exists it must still be being written (not\n"
      "sealed), writable by you and at least as large as SRC: the bytes go to\n"
      "its start. Otherwise memctl creates DST with SRC's size at --location\n"
      "(default: SRC's location) with --mode. DST is then sealed, unless\n"
      "--no-seal.\n"
      "file -> buffer: as put, but an existing DST being written is filled as\n"
      "above (a new one is at --location, default host).\n"
      "buffer -> file: as get (no symbolic link followed without\n"
      "--follow-symlinks).\n"
      "\n"
      "On failure a buffer cp created is unlinked; an existing one is left as\n"
      "it is, possibly part-written. On a terminal a progress bar shows on\n"
      "stderr; --json prints bytes, seconds, gb_per_s (10^9 bytes/s), path,\n"
      "retries, source, destination (not with DST -, which gets the bytes).",
      "  memctl cp model/w model/w-gpu1 --location device:1\n"
      "  memctl cp ./weights.bin model/w --location device:0 --priority critical\n"
      "  memctl cp model/w ./check.bin\n"
      "  memctl cp model/w buf:w.bin     # a buffer, although ./w.bin exists\n"
      "  memctl cp --json frames/0 backup/0 | jq .gb_per_s\n"
      "  producer | memctl cp - frames/0\n",
      invocation.json);
  cp->add_option("SRC", copy.source, "Buffer name (buf:NAME), file, or - (stdin)")
      ->required()
      ->type_name("");
  cp->add_option("DST", copy.destination, "Buffer name (buf:NAME), file, or - (stdout)")
      ->required()
      ->type_name("");
  cp->add_option("--location", copy.location,
                 "Where a new DST buffer lives: host, pinned, device:N (default: "
                 "SRC's location; host for a file)")
      ->type_name("LOCATION");
  cp->add_option("--mode", texts.mode, "A new DST buffer's permission bits, octal")
      ->check(ModeValidator())
      ->type_name("OCTAL")
      ->capture_default_str();
  cp->add_flag("--ephemeral", copy.ephemeral,
               "A new DST buffer goes with its last lease (see put --help)");
  cp->add_flag("--no-seal", texts.no_seal,
               "Leave DST unsealed, for the writer that holds it (a new DST that "
               "nobody else holds is removed when memctl exits)");
  cp->add_option("--wait", texts.wait,
                 "Wait up to this long for a SRC buffer to exist and be sealed")
      ->check(WaitValidator())
      ->type_name("SECONDS")
      ->capture_default_str();
  AddWaitForMemory(cp, texts, "When a new DST's location is full");
  cp->add_option("--owner", texts.owner,
                 "Accept a SRC buffer only if this user (name or uid) owns it")
      ->check(UserValidator())
      ->type_name("USER");
  cp->add_option("--size", texts.size, "As put --size, for a SRC stream")
      ->check(SizeValidator())
      ->type_name("BYTES");
  cp->add_option("--max-stream", texts.max_stream, "As put --max-stream")
      ->check(SizeValidator())
      ->type_name("BYTES")
      ->capture_default_str();
  AddTransferOptions(cp, texts, /*reads_files=*/true);
  AddFileOptions(cp, texts, /*writes_files=*/true);
  return cp;
}

CLI::App* DeclareUnlink(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* unlink = AddSubcommand(
      app, "unlink",
      "Remove buffers' names; each one's memory goes when its last lease ends",
      "Only a buffer's owner and root may unlink it; the daemon decides for each\n"
      "name apart. With several names (or -r) each one that fails is reported on\n"
      "stderr, the others are still unlinked, and the exit status is 1 if any\n"
      "failed; --json then prints an array of {name, unlinked, error}.\n"
      "\n"
      "-r takes prefixes: every buffer whose name starts with one, as memctl ls\n"
      "lists them, is unlinked after memctl lists them and asks on the terminal\n"
      "(\"unlink 17 buffers under job42/? [y/N]\"). --yes skips the question;\n"
      "without a terminal to ask on, -r refuses to run unless --yes is given.",
      "  memctl unlink frames/0\n"
      "  memctl unlink frames/0 frames/1 frames/2\n"
      "  memctl unlink -r job42/              # lists them, then asks\n"
      "  memctl unlink -r --yes job42/ job43/ # in a script\n",
      invocation.json);
  unlink->add_option("NAME", invocation.unlink.names, "Buffer names (with -r, prefixes)")
      ->required()
      ->type_name("");
  unlink->add_flag("-r,--recursive", invocation.unlink.recursive,
                   "Each NAME is a prefix: unlink every buffer whose name starts with it, "
                   "as listed (one re-created under a listed name meanwhile is refused)");
  unlink->add_flag("-y,--yes", invocation.yes,
                   "With -r: unlink without asking (needed where stdin is no terminal)");
  return unlink;
}

// NAME LOCATION, both required: a buffer's copy (prefetch, drop).
void AddNameAndLocation(CLI::App* sub, Invocation& invocation) {
  sub->add_option("NAME", invocation.name, "Buffer name")->required()->type_name("");
  sub->add_option("LOCATION", invocation.location, "host, pinned or device:N")
      ->required()
      ->type_name("");
}

CLI::App* DeclarePrefetch(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  CLI::App* prefetch = AddSubcommand(
      app, "prefetch", "Make a buffer's copy at a location ahead of its readers",
      "memd copies the buffer there through its transfer engine, once, charged\n"
      "to you; later opens there (memctl get --location, a client's open at a\n"
      "location) share it. memctl waits until the copy is current (--wait, 600\n"
      "seconds by default): the copy runs as a transfer of memctl's session and\n"
      "is cancelled if memctl exits first. memctl inspect shows the replicas.",
      "  memctl prefetch model/w device:1\n"
      "  memctl prefetch --wait 60 model/w device:1\n"
      "  memctl prefetch --wait-for-memory 5m model/w device:1  # room there may come\n",
      invocation.json);
  AddNameAndLocation(prefetch, invocation);
  prefetch->add_option("--wait", texts.prefetch_wait,
                       "Wait up to this long for the copy to be current")
      ->check(WaitValidator())
      ->type_name("SECONDS")
      ->capture_default_str();
  AddWaitForMemory(prefetch, texts, "When LOCATION is full for the copy");
  return prefetch;
}

CLI::App* DeclareDrop(CLI::App& app, Invocation& invocation, OptionTexts&) {
  CLI::App* drop = AddSubcommand(
      app, "drop", "Remove a buffer's copy at a location (never its home)",
      "Nobody may hold the copy (FAILED_PRECONDITION otherwise); its memory goes\n"
      "back to its pool and off its owner's quota.",
      "  memctl drop model/w device:1\n",
      invocation.json);
  AddNameAndLocation(drop, invocation);
  return drop;
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

constexpr Subcommand kSubcommands[] = {
    {DeclareStats, Command::kStats},       {DeclareList, Command::kList},
    {DeclareInspect, Command::kInspect},   {DeclareSessions, Command::kSessions},
    {DeclareUsage, Command::kUsage},       {DeclareAdvise, Command::kAdvise},
    {DeclareLeaks, Command::kLeaks},
    {DeclareTransfers, Command::kTransfers},
    {DeclarePut, Command::kPut},
    {DeclareGet, Command::kGet},           {DeclareCopy, Command::kCopy},
    {DeclareUnlink, Command::kUnlink},
    {DeclarePrefetch, Command::kPrefetch}, {DeclareDrop, Command::kDrop},
    {DeclarePing, Command::kPing},         {DeclareDevices, Command::kDevices},
    {DeclareTrim, Command::kTrim},
};

}  // namespace

std::span<const Subcommand> Subcommands() { return kSubcommands; }

}  // namespace memd::memctl
