#pragma once

// The subcommands of memctl, each one function over a connected client.
// They print their result to `out` (a table, or JSON with --json) and
// return the failure otherwise, tagged with the step that failed
// (failure.h); they never print half a result before a failure, except
// `get` to stdout, whose bytes stream.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "memd/client.h"

namespace memd::memctl {

// What `put` collects at most from a stream of unknown size (--max-stream).
inline constexpr std::uint64_t kDefaultMaxStreamBytes = std::uint64_t{1} << 30;

// Where a command prints its result, and in which form. Borrows `out`.
struct Output {
  std::ostream& out;
  bool json = false;
};

struct PutOptions {
  std::string name;
  std::string file;  // "-" reads stdin.
  std::string location = "host";
  std::uint32_t mode = 0600;
  // --size: the buffer's size, read straight into it from a stream; without
  // it a stream is collected in memory first, up to max_stream_bytes.
  std::optional<std::uint64_t> size;
  std::uint64_t max_stream_bytes = kDefaultMaxStreamBytes;
};

struct GetOptions {
  std::string name;
  std::string output;  // Empty or "-": stdout.
  absl::Duration wait = absl::ZeroDuration();
  // --owner: the uid that must own the buffer (OpenOptions::owner).
  std::optional<uid_t> owner;
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
absl::Status RunPing(Client& client, const Output& output);
// The GPUs the daemon serves.
absl::Status RunDevices(Client& client, const Output& output);
// Gives idle pool memory back to the system; `location` empty: every pool.
absl::Status RunTrim(Client& client, const std::string& location,
                     const Output& output);

// Named buffers (buffer_commands.cc).
absl::Status RunList(Client& client, const std::string& prefix, const Output& output);
absl::Status RunInspect(Client& client, const std::string& name, const Output& output);
// Creates a persistent buffer holding the file's bytes and seals it. A
// buffer left half-written by a failure is unlinked again.
absl::Status RunPut(Client& client, const PutOptions& options, const Output& output);
absl::Status RunGet(Client& client, const GetOptions& options, const Output& output);
absl::Status RunUnlink(Client& client, const std::string& name, const Output& output);

}  // namespace memd::memctl
