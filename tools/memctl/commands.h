#pragma once

// The subcommands of memctl, each one function over a connected client.
// They print their result to `out` (a table, or JSON with --json) and
// return the failure otherwise, tagged with the step that failed
// (failure.h); they never print half a result before a failure, except
// `get` to stdout, whose bytes stream.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/file_reader.h"
#include "memd/client.h"
#include "tools/memctl/file_io.h"
#include "tools/memctl/operand.h"

namespace memd::memctl {

// What `put` collects at most from a stream of unknown size (--max-stream).
inline constexpr std::uint64_t kDefaultMaxStreamBytes = std::uint64_t{1} << 30;

// Where a command prints its result, and in which form. Borrows `out`.
struct Output {
  std::ostream& out;
  bool json = false;
  // Where long copies draw a progress bar: stderr when it is a terminal,
  // else null (no bar).
  std::ostream* progress = nullptr;
  // Where a command over several items reports each item that failed, as
  // it happens (a FailureLine each): stderr; null drops them.
  std::ostream* errors = nullptr;
};

// unlink NAME... or unlink -r PREFIX...
struct UnlinkOptions {
  std::vector<std::string> names;  // Names; with `recursive`, prefixes.
  // -r: unlink every buffer whose name starts with one of `names`, as
  // `memctl ls` lists them, after asking (`confirm`).
  bool recursive = false;
  // Asked once, with the question to put, before -r unlinks anything:
  // true goes on. Null (--yes): no question.
  std::function<bool(const std::string& question)> confirm;
};

// Whether memctl reads a file for a device buffer around the page cache.
enum class DirectIoMode {
  kAuto,    // O_DIRECT where the filesystem allows it and the file is not
            // mostly cached already; else through the page cache.
  kAlways,  // O_DIRECT, or fail where the filesystem refuses it.
  kNever,   // Through the page cache.
};

// How memctl asks the daemon to move bytes (Client::Copy): cp, and put and
// get of device buffers.
struct TransferFlags {
  Priority priority = Priority::kNormal;
  std::uint64_t chunk_bytes = 0;  // 0: the daemon's default.
  // The copy's deadline, counted from when memctl starts moving bytes.
  std::optional<absl::Duration> timeout;
  // How a regular file for a device buffer is read (put, cp): on
  // read_threads threads (--read-threads; 0: one per CPU, at most 8), with
  // O_DIRECT or not (--direct-io, --no-direct-io; auto: O_DIRECT where the
  // filesystem allows it unless the page cache holds the file's start),
  // its pages kept in the page cache or dropped behind the reads (--cache).
  DirectIoMode direct_io = DirectIoMode::kAuto;
  int read_threads = 0;
  CachePolicy cache = CachePolicy::kKeep;
};

struct PutOptions {
  std::string name;  // Empty with format "safetensors": derived from the file.
  std::string file;  // "-" reads stdin.
  // --format: empty (the bytes as they are) or "safetensors" (a model's
  // weights by name: safetensors_commands.h).
  std::string format;
  std::string location = "host";
  std::string hint;  // --hint, with --location auto (CreateOptions::access_hint).
  std::string retention = "pinned";  // --retention (CreateOptions::retention).
  std::string numa;  // --numa (CreateOptions::numa): "" the daemon's default.
  absl::Duration wait_for_memory = absl::ZeroDuration();  // --wait-for-memory.
  std::uint32_t mode = 0600;
  // --size: the buffer's size, read straight into it from a stream; without
  // it a stream is collected in memory first, up to max_stream_bytes.
  std::optional<std::uint64_t> size;
  std::uint64_t max_stream_bytes = kDefaultMaxStreamBytes;
  bool ephemeral = false;  // --ephemeral: gone with its last lease.
  std::map<std::string, std::string> attrs = {};  // --attr KEY=VALUE.
  TransferFlags transfer;
  FileOptions files;  // --fifo-timeout.
};

struct GetOptions {
  std::string name;
  std::string output;  // Empty or "-": stdout.
  absl::Duration wait = absl::ZeroDuration();
  // --owner: the uid that must own the buffer (OpenOptions::owner).
  std::optional<uid_t> owner;
  // --location: read the buffer's copy there (OpenOptions::location: the
  // daemon makes one where there is none); empty: its home.
  std::string location;
  // --wait-for-memory: how long that copy waits for memory at a full
  // location (OpenOptions::wait_for_memory).
  absl::Duration wait_for_memory = absl::ZeroDuration();
  TransferFlags transfer;
  FileOptions files;  // --follow-symlinks, --fifo-timeout.
};

// cp SRC DST: each operand a buffer name, a file (starts with "/", "./" or
// "../", which no buffer name can), or "-" (stdin, stdout).
struct CopyCommandOptions {
  // The operands as given, then (ParseCommandLine) each the name or path it
  // names (operand.h: "buf:" taken off), of the kind classified once.
  std::string source;
  std::string destination;
  Operand::Kind source_kind = Operand::Kind::kBuffer;
  Operand::Kind destination_kind = Operand::Kind::kBuffer;
  // A new destination buffer's location; empty: the source buffer's (host
  // for a file).
  std::string location;
  std::uint32_t mode = 0600;
  bool ephemeral = false;
  // --wait-for-memory: how long creating a new destination may wait for
  // memory at a full location (CreateOptions::wait_for_memory).
  absl::Duration wait_for_memory = absl::ZeroDuration();
  bool seal = true;  // --no-seal leaves the destination open for writing.
  // A buffer source: how long to wait for its seal, and who must own it.
  absl::Duration wait = absl::ZeroDuration();
  std::optional<uid_t> owner;
  // A stream source: as put's --size and --max-stream.
  std::optional<std::uint64_t> size;
  std::uint64_t max_stream_bytes = kDefaultMaxStreamBytes;
  TransferFlags transfer;
  FileOptions files;  // For a file operand: --follow-symlinks, --fifo-timeout.
};

// Daemon-wide views and actions (daemon_commands.cc).
absl::Status RunStats(Client& client, const Output& output);
// stats --watch: a compact view every `every`, `count` times (0: until
// interrupted). Writes each view to `output` and flushes it at once (the
// other commands print only on success); on a terminal it redraws in place.
absl::Status RunStatsWatch(Client& client, absl::Duration every, int count,
                           const Output& output, bool terminal);
absl::Status RunSessions(Client& client, const Output& output);
absl::Status RunUsage(Client& client, const Output& output);
// Recommendations for the buffers whose names start with `prefix`, one line
// each (FormatRecommendation).
absl::Status RunAdvise(Client& client, const std::string& prefix, const Output& output);
// The leak report (PrintLeaks, or LeakReportJson with --json).
absl::Status RunLeaks(Client& client, const LeaksOptions& options, const Output& output);
// The copies queued or running now (TransferListJson with --json).
absl::Status RunTransfers(Client& client, const Output& output);
absl::Status RunPing(Client& client, const Output& output);
// The GPUs the daemon serves.
absl::Status RunDevices(Client& client, const Output& output);
// Gives idle pool memory back to the system; `location` empty: every pool.
absl::Status RunTrim(Client& client, const std::string& location,
                     const Output& output);

// Named buffers (buffer_commands.cc).
// With `include_unlinked`, also the buffers unlinked but still leased,
// marked so (ListOptions::include_unlinked).
absl::Status RunList(Client& client, const std::string& prefix, bool include_unlinked,
                     const Output& output);
absl::Status RunInspect(Client& client, const std::string& name, const Output& output);
// Creates a persistent buffer holding the file's bytes and seals it. A
// buffer left half-written by a failure is unlinked again.
absl::Status RunPut(Client& client, const PutOptions& options, const Output& output);
absl::Status RunGet(Client& client, const GetOptions& options, const Output& output);
// One NAME: unlinks it, or fails as the daemon says. Several, or -r: each
// unlinked apart (the daemon authorizes each); a failed one is reported on
// output.errors and the others go on; the failure returned then names how
// many failed and is Partial (failure.h): what was printed stands.
absl::Status RunUnlink(Client& client, const UnlinkOptions& options, const Output& output);
// A buffer's copy at `location`: made (waiting up to `wait`, zero: not at
// all) or dropped; each prints the buffer's replicas after.
absl::Status RunPrefetch(Client& client, const std::string& name, const std::string& location,
                         const PrefetchOptions& options, const Output& output);
absl::Status RunDrop(Client& client, const std::string& name, const std::string& location,
                     const Output& output);

// cp (copy_command.cc): buffer to buffer through Client::Copy; a file to a
// buffer as put, a buffer to a file as get.
absl::Status RunCopy(Client& client, const CopyCommandOptions& options,
                     const Output& output);

}  // namespace memd::memctl
