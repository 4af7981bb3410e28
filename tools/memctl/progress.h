#pragma once

// Progress of a long copy, for a human at a terminal: one line on stderr,
//   put weights  [##########..........]  1.2 GiB / 2.4 GiB  3.10 GB/s  ETA 0:01
// redrawn in place at most 10 times a second and erased at the end. The
// formatting is pure (tested without a terminal); ProgressBar only decides
// when to draw.

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memd::memctl {

// Decimal gigabytes per second, as --json's "gb_per_s" and the bar show it; 0
// when no time has passed.
double GigabytesPerSecond(std::uint64_t bytes, absl::Duration elapsed);

// "3.10 GB/s", "512.00 MB/s", "0 B/s": decimal units, as links are rated.
std::string FormatRate(double bytes_per_second);

// "0:07", "12:30", "2:03:04"; "--:--" when unknown (no rate yet).
std::string FormatEta(absl::Duration left);

// The line for `done` of `total` bytes (total 0: unknown, no bar and no
// ETA) after `elapsed`, at most `width` columns.
std::string FormatProgressLine(const std::string& label, std::uint64_t done,
                               std::uint64_t total, absl::Duration elapsed,
                               int width);

/// Draws FormatProgressLine on a terminal. Shows nothing for copies that end
/// within kProgressDelay (a flash of a bar helps nobody), redraws at most
/// every kProgressInterval, and erases its line on Clear() or destruction.
/// Disabled (every call a no-op) when `out` is null. Not thread-safe.
class ProgressBar {
 public:
  static constexpr absl::Duration kProgressDelay = absl::Milliseconds(300);
  static constexpr absl::Duration kProgressInterval = absl::Milliseconds(100);
  static constexpr int kWidth = 79;

  ProgressBar(std::ostream* out, std::string label, absl::Time start = absl::Now());
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return out_ != nullptr; }
  void Update(std::uint64_t done, std::uint64_t total, absl::Time now = absl::Now());
  // Erases the line, if one was drawn.
  void Clear();

 private:
  std::ostream* out_;
  std::string label_;
  absl::Time start_;
  absl::Time last_drawn_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace memd::memctl
