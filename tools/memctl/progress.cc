#include "tools/memctl/progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/bytes.h"

namespace memd::memctl {
namespace {

constexpr int kBarCells = 20;

std::string Bar(std::uint64_t done, std::uint64_t total) {
  const int filled = total == 0 ? 0
                                : static_cast<int>(static_cast<double>(std::min(done, total)) /
                                                   static_cast<double>(total) * kBarCells);
  return absl::StrCat("[", std::string(filled, '#'), std::string(kBarCells - filled, '.'),
                      "]");
}

}  // namespace

double GigabytesPerSecond(std::uint64_t bytes, absl::Duration elapsed) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (!(seconds > 0)) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

std::string FormatRate(double bytes_per_second) {
  if (!(bytes_per_second > 0) || !std::isfinite(bytes_per_second)) return "0 B/s";
  constexpr const char* kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  int unit = 0;
  while (bytes_per_second >= 1000 && unit < 4) {
    bytes_per_second /= 1000;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f B/s", bytes_per_second);
  return absl::StrFormat("%.2f %s", bytes_per_second, kUnits[unit]);
}

std::string FormatEta(absl::Duration left) {
  if (left < absl::ZeroDuration() || left == absl::InfiniteDuration()) return "--:--";
  const std::int64_t seconds = absl::ToInt64Seconds(absl::Ceil(left, absl::Seconds(1)));
  const std::int64_t hours = seconds / 3600;
  if (hours > 0) {
    return absl::StrFormat("%d:%02d:%02d", hours, (seconds / 60) % 60, seconds % 60);
  }
  return absl::StrFormat("%d:%02d", seconds / 60, seconds % 60);
}

std::string FormatProgressLine(const std::string& label, std::uint64_t done,
                               std::uint64_t total, absl::Duration elapsed,
                               int width) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  std::string numbers;
  if (total == 0) {
    numbers = absl::StrCat(FormatBytes(done), "  ", FormatRate(rate));
  } else {
    const absl::Duration left =
        rate > 0 ? absl::Seconds(static_cast<double>(total - std::min(done, total)) / rate)
                 : absl::InfiniteDuration();
    numbers = absl::StrCat(Bar(done, total), "  ", FormatBytes(done), " / ",
                           FormatBytes(total), "  ", FormatRate(rate), "  ETA ",
                           FormatEta(left));
  }
  // The numbers matter more than the label: shorten the label first.
  const int room = width - static_cast<int>(numbers.size()) - 2;
  std::string shown = label;
  if (room < 4) {
    shown.clear();
  } else if (static_cast<int>(shown.size()) > room) {
    shown = absl::StrCat(shown.substr(0, static_cast<std::size_t>(room - 3)), "...");
  }
  std::string line = shown.empty() ? numbers : absl::StrCat(shown, "  ", numbers);
  if (static_cast<int>(line.size()) > width) line.resize(static_cast<std::size_t>(width));
  return line;
}

ProgressBar::ProgressBar(std::ostream* out, std::string label, absl::Time start)
    : out_(out), label_(std::move(label)), start_(start) {}

ProgressBar::~ProgressBar() { Clear(); }

void ProgressBar::Update(std::uint64_t done, std::uint64_t total, absl::Time now) {
  if (out_ == nullptr || now - start_ < kProgressDelay ||
      now - last_drawn_ < kProgressInterval) {
    return;
  }
  last_drawn_ = now;
  drawn_ = true;
  // \r and "erase to end of line": the new line may be shorter.
  *out_ << '\r' << FormatProgressLine(label_, done, total, now - start_, kWidth)
        << "\033[K" << std::flush;
}

void ProgressBar::Clear() {
  if (out_ == nullptr || !drawn_) return;
  drawn_ = false;
  *out_ << "\r\033[K" << std::flush;
}

}  // namespace memd::memctl
