#include "common/bytes.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace memd {

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  std::string text = absl::StrFormat("%.1f", value);
  if (absl::EndsWith(text, ".0")) text.resize(text.size() - 2);
  return absl::StrCat(text, " ", kUnits[unit]);
}

absl::StatusOr<std::uint64_t> ParseBytes(std::string_view input) {
  absl::string_view text =
      absl::StripAsciiWhitespace(absl::string_view(input.data(), input.size()));
  std::size_t digits = 0;
  while (digits < text.size() &&
         (absl::ascii_isdigit(text[digits]) || text[digits] == '.')) {
    ++digits;
  }
  absl::string_view number = text.substr(0, digits);
  std::string unit = absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(text.substr(digits)));
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "k" || unit == "kib") shift = 10;
  else if (unit == "m" || unit == "mib") shift = 20;
  else if (unit == "g" || unit == "gib") shift = 30;
  else if (unit == "t" || unit == "tib") shift = 40;
  double value = 0;
  if (number.empty() || shift < 0 || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read '", text, "' as a size; write bytes or a number with "
        "KiB, MiB, GiB or TiB"));
  }
  double bytes = std::ldexp(value, shift);
  if (bytes >= 18446744073709551615.0) {
    return absl::OutOfRangeError(absl::StrCat("size '", text, "' is too large"));
  }
  if (bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is not a whole number of bytes"));
  }
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace memd
