#include "daemon/broker/quota.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bytes.h"

namespace memd::broker {
namespace {

// absl::string_view is its own type in Debian's Abseil.
std::string_view Std(absl::string_view text) { return {text.data(), text.size()}; }

}  // namespace

absl::StatusOr<Quota> Quota::Parse(std::string_view text) {
  Quota quota;
  const absl::string_view whole = absl::StripAsciiWhitespace(
      absl::string_view(text.data(), text.size()));
  if (whole.empty()) return quota;
  if (whole.find('=') == absl::string_view::npos) {
    absl::StatusOr<std::uint64_t> bytes = ParseBytes(Std(whole));
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "quota '", whole, "': ", bytes.status().message(),
          " (write SIZE, or LOCATION=SIZE,... with LOCATION host, pinned, "
          "device or device:N)"));
    }
    quota.all_ = *bytes;
    return quota;
  }
  for (absl::string_view part : absl::StrSplit(whole, ',')) {
    std::vector<absl::string_view> sides = absl::StrSplit(part, absl::MaxSplits('=', 1));
    const absl::string_view where = absl::StripAsciiWhitespace(sides[0]);
    if (sides.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "quota '", whole, "': '", part, "' is not LOCATION=SIZE"));
    }
    absl::StatusOr<std::uint64_t> bytes =
        ParseBytes(Std(absl::StripAsciiWhitespace(sides[1])));
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("quota '", whole, "': ", where, ": ", bytes.status().message()));
    }
    std::uint64_t* slot = nullptr;
    if (where == "host") {
      slot = &quota.host_;
    } else if (where == "pinned") {
      slot = &quota.pinned_;
    } else if (where == "device") {
      slot = &quota.device_;
    } else if (absl::StatusOr<Location> location =
                   Location::Parse(Std(where));
               location.ok() && location->kind == Location::Kind::kDevice &&
               absl::StartsWith(where, "device:")) {
      slot = &quota.devices_[location->device];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "quota '", whole, "': unknown location '", where,
          "' (host, pinned, device or device:N)"));
    }
    *slot = *bytes;
  }
  return quota;
}

std::uint64_t Quota::For(const Location& location) const {
  switch (location.kind) {
    case Location::Kind::kHost:
      return host_ != 0 ? host_ : all_;
    case Location::Kind::kPinned:
      return pinned_ != 0 ? pinned_ : all_;
    case Location::Kind::kDevice:
      if (auto it = devices_.find(location.device); it != devices_.end()) return it->second;
      return device_ != 0 ? device_ : all_;
  }
  return 0;
}

bool Quota::empty() const {
  if (all_ != 0 || host_ != 0 || pinned_ != 0 || device_ != 0) return false;
  for (const auto& [device, bytes] : devices_) {
    if (bytes != 0) return false;
  }
  return true;
}

}  // namespace memd::broker
