#pragma once

// The allocation trace: a CSV file with one pool event a line, recorded by the
// daemon (TracingPool, --trace-file) or generated (memd-tracegen), and
// replayed against pools by memd-replay.
//
//   op,id,bytes        the header, always the first line
//   a,17,1048576       allocates id 17: 1 MiB as requested (not rounded)
//   f,17,0             frees id 17
//
// ids and byte counts are unsigned 64-bit decimal numbers. An id names one
// allocation while it is live and may be used again once it is freed. Lines
// end in "\n" or "\r\n"; the last line may lack its newline. Empty lines are
// errors wherever they are (a trace is written by programs, and a blank line
// most likely means a truncated or concatenated file).

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace memd::pool {

inline constexpr char kTraceHeader[] = "op,id,bytes";

// Longer lines are malformed: the longest valid one is "a," + 20 digits +
// "," + 20 digits + "\r". The limit keeps a garbage file from being read
// into memory as one line.
inline constexpr std::size_t kMaxTraceLineLength = 256;

struct TraceEvent {
  enum class Op { kAllocate, kFree };

  Op op = Op::kAllocate;
  std::uint64_t id = 0;
  std::uint64_t bytes = 0;  // As requested for kAllocate; 0 for kFree.

  static TraceEvent Allocate(std::uint64_t id, std::uint64_t bytes) {
    return {Op::kAllocate, id, bytes};
  }
  static TraceEvent Free(std::uint64_t id) { return {Op::kFree, id, 0}; }

  friend bool operator==(const TraceEvent&, const TraceEvent&) = default;
};

// "a,17,1048576" or "f,17,0", without the newline.
std::string FormatTraceEvent(const TraceEvent& event);

/// Reads a trace one event at a time and checks it as it goes: the header,
/// the syntax of every line, and that allocations and frees pair up (an id
/// is allocated only when it is not live, freed only when it is). Borrows
/// the stream, which must outlive the reader. Memory: one entry per live id.
/// Not thread-safe.
///
/// Errors: INVALID_ARGUMENT "line N: <reason>" for a malformed trace, where
/// N counts physical lines from 1 (the header); DATA_LOSS when the stream
/// fails. After an error the reader is not usable.
class TraceReader {
 public:
  explicit TraceReader(std::istream& in) : in_(in) {}

  // The next event, or nullopt at the end of the trace.
  absl::StatusOr<std::optional<TraceEvent>> Next();

  // The line of the event Next() returned last (or of its error).
  std::uint64_t line_number() const { return line_number_; }

  // Ids allocated and not freed so far.
  std::size_t live_count() const { return live_.size(); }

 private:
  // Reads the next line into line_ without its line ending. False at the
  // end of the input.
  absl::StatusOr<bool> ReadLine();
  absl::Status Error(std::string_view reason) const;
  absl::StatusOr<TraceEvent> ParseEvent() const;
  absl::Status CheckPairing(const TraceEvent& event);

  std::istream& in_;
  std::string line_;
  std::uint64_t line_number_ = 0;
  // Live id -> the line that allocated it, for the message of a double
  // allocation.
  absl::flat_hash_map<std::uint64_t, std::uint64_t> live_;
};

/// Appends events to a trace file: the header first, then one line per
/// Write, buffered and written whole lines at a time, so several pools (one
/// per location) may share one file. Also hands out the ids of that file
/// (NextId), so they stay unique across those pools. Flushes when the buffer
/// fills, on Flush() and on destruction. Thread-safe.
///
/// A write error is sticky: later writes are dropped and Flush() (and
/// status()) return it, so a full disk never fails an allocation but is
/// still reported. Errors are those of write(2) (see ErrnoStatus).
class TraceWriter {
 public:
  // Creates or truncates `path` (mode 0640 less the umask) and writes the
  // header. Errors: those of open(2), naming the path.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Create(
      const std::string& path);

  // Writes to `fd` (borrowed: it must stay open while the writer lives);
  // `label` names it in errors ("stdout"). Writes the header.
  TraceWriter(int fd, std::string label);

  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // A fresh id for this file: 1, 2, 3, ...
  std::uint64_t NextId();

  // Buffers one line. Returns the sticky status (OK unless a write failed).
  absl::Status Write(const TraceEvent& event);

  // Writes out everything buffered.
  absl::Status Flush();

  absl::Status status() const;

 private:
  TraceWriter(UniqueFd owned, std::string label);
  void AppendLocked(std::string_view text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  UniqueFd owned_;  // Invalid when the descriptor is borrowed.
  const int fd_;
  const std::string label_;

  mutable absl::Mutex mu_;
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace memd::pool
