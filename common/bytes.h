#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace memd {

// 1536 -> "1.5 KiB", 1048576 -> "1 MiB", 17 -> "17 B".
std::string FormatBytes(std::uint64_t bytes);

// Parses a byte count: a number, optionally a fraction, and a unit in any
// case: none or B (bytes); IEC KiB MiB GiB TiB (1024^1..4); SI kB MB GB
// TB (1000^1..4); and the short K M G T, which mean KiB..TiB as they always
// did (as memd always read them, and ls -h prints them).
// "4096", "64KiB", "1.5 GiB", "2G", "100MB" (10^8). kSizeUnits says it for
// help texts. Errors: INVALID_ARGUMENT naming the text and the units;
// OUT_OF_RANGE when the value does not fit 64 bits.
absl::StatusOr<std::uint64_t> ParseBytes(std::string_view text);

// The units ParseBytes reads, for help texts and messages.
inline constexpr char kSizeUnits[] =
    "KiB MiB GiB TiB (or K M G T) = 1024^n, kB MB GB TB = 1000^n, any case";

// Rounds `value` up to a multiple of `alignment` (a power of two). Returns 0
// on overflow, which no caller treats as a valid size.
constexpr std::uint64_t AlignUp(std::uint64_t value, std::uint64_t alignment) {
  std::uint64_t rounded = (value + alignment - 1) & ~(alignment - 1);
  return rounded < value ? 0 : rounded;
}

}  // namespace memd
