#include "tools/memctl/cli_values.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/bytes.h"
#include "tools/memctl/format.h"

namespace memd::memctl {

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

// A duration as memctl's options take it: a number of seconds ("90",
// "0.5"), or with units ("30s", "90m", "1h30m", "2d"); never negative or
// infinite.
std::optional<absl::Duration> ParseDurationText(const std::string& text) {
  double number = 0;
  if (absl::SimpleAtod(text, &number)) {
    if (!std::isfinite(number) || number < 0) return std::nullopt;
    return absl::Seconds(number);
  }
  // absl's units stop at hours; a leak is often days old.
  if (absl::string_view days(text); absl::ConsumeSuffix(&days, "d")) {
    if (!absl::SimpleAtod(days, &number) || !std::isfinite(number) || number < 0) {
      return std::nullopt;
    }
    return absl::Hours(24 * number);
  }
  absl::Duration duration;
  if (!absl::ParseDuration(text, &duration) || duration < absl::ZeroDuration() ||
      duration == absl::InfiniteDuration()) {
    return std::nullopt;
  }
  return duration;
}

std::optional<double> ParseWait(const std::string& text) {
  std::optional<absl::Duration> wait = ParseDurationText(text);
  if (!wait.has_value() || *wait > absl::Seconds(kMaxWaitSeconds)) return std::nullopt;
  return absl::ToDoubleSeconds(*wait);
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
                            "' is not a size of at least 1 byte like 4096, 64KiB, 2GiB "
                            "or 100MB (", kSizeUnits, ")");
      },
      "");
}

CLI::Validator FormatValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "safetensors") return "";
        return absl::StrCat("'", text, "' is no format memctl reads; the one there is: "
                                       "safetensors");
      },
      "");
}


std::optional<Priority> ParsePriority(const std::string& text) {
  if (text == "critical") return Priority::kCritical;
  if (text == "normal") return Priority::kNormal;
  if (text == "background") return Priority::kBackground;
  return std::nullopt;
}

CLI::Validator PriorityValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParsePriority(text).has_value()) return "";
        return absl::StrCat("'", text, "' is no priority; use ", kPriorities);
      },
      "");
}

std::optional<CachePolicy> ParseCachePolicy(const std::string& text) {
  if (text == "keep") return CachePolicy::kKeep;
  if (text == "drop") return CachePolicy::kDrop;
  return std::nullopt;
}

CLI::Validator CachePolicyValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseCachePolicy(text).has_value()) return "";
        return absl::StrCat("'", text, "' is no page cache policy; use keep or drop");
      },
      "");
}

std::optional<int> ParseReadThreads(const std::string& text) {
  int threads = 0;
  if (!absl::SimpleAtoi(text, &threads) || threads < 1 ||
      threads > ParallelFileReader::kMaxReadThreads) {
    return std::nullopt;
  }
  return threads;
}

CLI::Validator ReadThreadsValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseReadThreads(text).has_value()) return "";
        return absl::StrCat("'", text, "' is no thread count; use 1 to ",
                            ParallelFileReader::kMaxReadThreads);
      },
      "");
}

CLI::Validator TimeoutValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::optional<double> seconds = ParseWait(text);
        if (seconds.has_value() && *seconds > 0) return "";
        return absl::StrCat("'", text, "' is not a number of seconds above 0 and at most ",
                            kMaxWaitSeconds);
      },
      "");
}

CLI::Validator OlderThanValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::optional<absl::Duration> age = ParseDurationText(text);
        if (age.has_value() && *age <= kMaxOlderThan) return "";
        return absl::StrCat("'", text,
                            "' is no duration from 0 to 3650d (like 90, 30s, 90m, 1h, 7d)");
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

}  // namespace memd::memctl
