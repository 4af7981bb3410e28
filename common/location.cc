#include "common/location.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace memd {

absl::StatusOr<Location> Location::Parse(std::string_view text) {
  if (text.empty() || text == "host") return Host();
  if (text == "pinned") return Pinned();
  constexpr std::string_view kDevicePrefix = "device:";
  if (text.substr(0, kDevicePrefix.size()) == kDevicePrefix) {
    std::string_view number = text.substr(kDevicePrefix.size());
    int ordinal = -1;
    if (!number.empty() && number.size() <= 4 &&
        number.find_first_not_of("0123456789") == std::string_view::npos &&
        absl::SimpleAtoi(absl::string_view(number.data(), number.size()),
                         &ordinal)) {
      return Device(ordinal);
    }
  }
  std::string shown(text.substr(0, 64));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown location '", absl::CHexEscape(shown),
                   "'; expected host, pinned or device:N"));
}

std::string Location::ToString() const {
  switch (kind) {
    case Kind::kHost:
      return "host";
    case Kind::kPinned:
      return "pinned";
    case Kind::kDevice:
      return absl::StrCat("device:", device);
  }
  return "unknown";
}

}  // namespace memd
