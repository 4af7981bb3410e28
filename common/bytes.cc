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
  // The unit's power of its base: K 1, M 2, G 3, T 4; "iB" or the letter
  // alone is 1024, "B" after the letter 1000.
  int power = -1;
  double base = 1024;
  if (unit.empty() || unit == "b") {
    power = 0;
  } else if (const std::size_t at = std::string_view("kmgt").find(unit[0]);
             at != std::string_view::npos) {
    const std::string_view rest = std::string_view(unit).substr(1);
    if (rest.empty() || rest == "ib") power = static_cast<int>(at) + 1;
    if (rest == "b") {
      power = static_cast<int>(at) + 1;
      base = 1000;
    }
  }
  double value = 0;
  if (number.empty() || power < 0 || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read '", text, "' as a size; write bytes, or a number with a unit: ",
        kSizeUnits));
  }
  double bytes = value * std::pow(base, power);
  // A decimal fraction times 1000^n misses the whole number by a rounding
  // error (0.3 kB): that much is forgiven, not half a byte.
  if (const double whole = std::round(bytes); std::fabs(bytes - whole) <= whole * 1e-12) {
    bytes = whole;
  }
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
