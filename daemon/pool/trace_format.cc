#include "daemon/pool/trace_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace memd::pool {
namespace {

// Big enough that a busy pool writes rarely, small enough that a crash
// loses little.
constexpr std::size_t kWriteBufferBytes = 64 * 1024;

// Quoted and escaped, for messages about text read from a file.
std::string Quote(std::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(absl::string_view(text.data(), text.size())),
                      "'");
}

// Strict unsigned decimal: digits only, no sign, no spaces, not empty.
// `what` names the field in the reason.
absl::StatusOr<std::uint64_t> ParseField(std::string_view text, std::string_view what) {
  const std::string name(what);
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("empty ", name));
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " ", Quote(text), " is not an unsigned decimal integer"));
    }
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " ", Quote(text), " is out of range (more than ",
                       std::numeric_limits<std::uint64_t>::max(), ")"));
    }
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace

std::string FormatTraceEvent(const TraceEvent& event) {
  return absl::StrCat(event.op == TraceEvent::Op::kAllocate ? "a," : "f,", event.id,
                      ",", event.bytes);
}

absl::StatusOr<bool> TraceReader::ReadLine() {
  line_.clear();
  ++line_number_;
  std::streambuf* buffer = in_.rdbuf();
  bool any = false;
  bool too_long = false;
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) break;
    any = true;
    if (c == '\n') break;
    if (line_.size() < kMaxTraceLineLength) {
      line_.push_back(static_cast<char>(c));
    } else {
      too_long = true;
    }
  }
  if (in_.bad()) {
    return absl::DataLossError(absl::StrCat("line ", line_number_, ": read error"));
  }
  if (!any) return false;
  if (too_long) {
    return Error(absl::StrCat("longer than ", kMaxTraceLineLength, " characters"));
  }
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

absl::Status TraceReader::Error(std::string_view reason) const {
  return absl::InvalidArgumentError(
      absl::StrCat("line ", line_number_, ": ", absl::string_view(reason.data(), reason.size())));
}

absl::StatusOr<std::optional<TraceEvent>> TraceReader::Next() {
  if (line_number_ == 0) {
    absl::StatusOr<bool> read = ReadLine();
    if (!read.ok()) return read.status();
    if (!*read) return Error(absl::StrCat("missing the header ", Quote(kTraceHeader),
                                          " (the file is empty)"));
    if (line_ != kTraceHeader) {
      return Error(absl::StrCat("expected the header ", Quote(kTraceHeader), ", got ",
                                Quote(line_)));
    }
  }
  absl::StatusOr<bool> read = ReadLine();
  if (!read.ok()) return read.status();
  if (!*read) {
    --line_number_;  // No such line: keep pointing at the last one read.
    return std::nullopt;
  }
  if (line_.empty()) return Error("empty line");
  absl::StatusOr<TraceEvent> event = ParseEvent();
  if (!event.ok()) return event.status();
  if (absl::Status paired = CheckPairing(*event); !paired.ok()) return paired;
  return *event;
}

absl::StatusOr<TraceEvent> TraceReader::ParseEvent() const {
  const std::string_view line = line_;
  const std::size_t fields =
      static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')) + 1;
  if (fields != 3) {
    return Error(absl::StrCat("expected 3 comma-separated fields (op,id,bytes), got ",
                              fields));
  }
  const std::size_t first = line.find(',');
  const std::size_t second = line.find(',', first + 1);
  const std::string_view op = line.substr(0, first);
  const std::string_view id_text = line.substr(first + 1, second - first - 1);
  const std::string_view bytes_text = line.substr(second + 1);

  TraceEvent event;
  if (op == "a") {
    event.op = TraceEvent::Op::kAllocate;
  } else if (op == "f") {
    event.op = TraceEvent::Op::kFree;
  } else {
    return Error(absl::StrCat("unknown op ", Quote(op), " (expected a or f)"));
  }
  absl::StatusOr<std::uint64_t> id = ParseField(id_text, "id");
  if (!id.ok()) return Error(std::string(id.status().message()));
  absl::StatusOr<std::uint64_t> bytes = ParseField(bytes_text, "bytes");
  if (!bytes.ok()) return Error(std::string(bytes.status().message()));
  event.id = *id;
  event.bytes = *bytes;
  if (event.op == TraceEvent::Op::kAllocate && event.bytes == 0) {
    return Error(absl::StrCat("allocation of 0 bytes (id ", event.id, ")"));
  }
  if (event.op == TraceEvent::Op::kFree && event.bytes != 0) {
    return Error(absl::StrCat("free of id ", event.id, " with bytes ", event.bytes,
                              " (a free has bytes 0)"));
  }
  return event;
}

absl::Status TraceReader::CheckPairing(const TraceEvent& event) {
  if (event.op == TraceEvent::Op::kAllocate) {
    auto [it, inserted] = live_.try_emplace(event.id, line_number_);
    if (!inserted) {
      return Error(absl::StrCat("allocation of id ", event.id,
                                ", which is live (allocated on line ", it->second,
                                ")"));
    }
    return absl::OkStatus();
  }
  if (live_.erase(event.id) == 0) {
    return Error(absl::StrCat("free of id ", event.id, ", which is not live"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(
    const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640));
  if (!fd) {
    absl::Status status = ErrnoStatus("open", errno);
    return absl::Status(status.code(),
                        absl::StrCat("trace file ", path, ": ", status.message()));
  }
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(fd), path));
}

TraceWriter::TraceWriter(int fd, std::string label) : fd_(fd), label_(std::move(label)) {
  absl::MutexLock lock(&mu_);
  AppendLocked(absl::StrCat(kTraceHeader, "\n"));
}

TraceWriter::TraceWriter(UniqueFd owned, std::string label)
    : TraceWriter(owned.get(), std::move(label)) {
  owned_ = std::move(owned);
}

TraceWriter::~TraceWriter() {
  absl::MutexLock lock(&mu_);
  FlushLocked();
}

std::uint64_t TraceWriter::NextId() {
  absl::MutexLock lock(&mu_);
  return next_id_++;
}

absl::Status TraceWriter::Write(const TraceEvent& event) {
  std::string line = FormatTraceEvent(event);
  line.push_back('\n');
  absl::MutexLock lock(&mu_);
  AppendLocked(line);
  return status_;
}

absl::Status TraceWriter::Flush() {
  absl::MutexLock lock(&mu_);
  FlushLocked();
  return status_;
}

absl::Status TraceWriter::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void TraceWriter::AppendLocked(std::string_view text) {
  if (!status_.ok()) return;
  buffer_.append(text.data(), text.size());
  if (buffer_.size() >= kWriteBufferBytes) FlushLocked();
}

void TraceWriter::FlushLocked() {
  std::size_t done = 0;
  while (status_.ok() && done < buffer_.size()) {
    const ssize_t written = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (written < 0) {
      if (errno == EINTR) continue;
      absl::Status status = ErrnoStatus("write", errno);
      status_ = absl::Status(status.code(),
                             absl::StrCat("trace file ", label_, ": ", status.message()));
      break;
    }
    done += static_cast<std::size_t>(written);
  }
  buffer_.clear();
}

}  // namespace memd::pool
