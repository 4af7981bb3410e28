#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace memd {

// 1536 -> "1.5 KiB", 1048576 -> "1 MiB", 17 -> "17 B".
std::string FormatBytes(std::uint64_t bytes);

// Parses "4096", "64KiB", "1.5 GiB", "2G" (binary units; K/M/G/T with or
// without "iB"). Errors: INVALID_ARGUMENT naming the text; OUT_OF_RANGE when
// the value does not fit 64 bits.
absl::StatusOr<std::uint64_t> ParseBytes(std::string_view text);

// Rounds `value` up to a multiple of `alignment` (a power of two). Returns 0
// on overflow, which no caller treats as a valid size.
constexpr std::uint64_t AlignUp(std::uint64_t value, std::uint64_t alignment) {
  std::uint64_t rounded = (value + alignment - 1) & ~(alignment - 1);
  return rounded < value ? 0 : rounded;
}

}  // namespace memd
