#pragma once

// The values memctl's options take, as text: parsers, and CLI11 validators
// that refuse a bad one during the parse with a message that says what
// would do.

#include <cstdint>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "common/file_reader.h"
#include "memd/client.h"

namespace memd::memctl {

// --wait beyond a day is almost surely a typo (milliseconds?), and an
// unbounded wait would overflow the call deadline.
inline constexpr double kMaxWaitSeconds = 86400;
// leaks --older-than: the daemon's own bound (ten years).
inline constexpr absl::Duration kMaxOlderThan = absl::Hours(24 * 3650);
// What --priority takes.
inline constexpr char kPriorities[] = "critical, normal or background";

// "0600", "640", "0" -> permission bits; the daemon decides which it takes.
std::optional<std::uint32_t> ParseMode(const std::string& text);
// A duration as memctl's options take it: a number of seconds ("90",
// "0.5"), or with units ("30s", "90m", "1h30m", "2d"); never negative or
// infinite.
std::optional<absl::Duration> ParseDurationText(const std::string& text);
// A duration of at most kMaxWaitSeconds, in seconds.
std::optional<double> ParseWait(const std::string& text);
std::optional<Priority> ParsePriority(const std::string& text);
// --cache: "keep" or "drop".
std::optional<CachePolicy> ParseCachePolicy(const std::string& text);
// --read-threads: 1..ParallelFileReader::kMaxReadThreads.
std::optional<int> ParseReadThreads(const std::string& text);

CLI::Validator ModeValidator();
CLI::Validator UserValidator();
CLI::Validator SizeValidator();
CLI::Validator FormatValidator();
CLI::Validator PriorityValidator();
CLI::Validator CachePolicyValidator();
CLI::Validator ReadThreadsValidator();
CLI::Validator TimeoutValidator();
CLI::Validator OlderThanValidator();
CLI::Validator WaitValidator();

}  // namespace memd::memctl
