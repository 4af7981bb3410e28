#include "daemon/broker/retention.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace memd::broker {
namespace {

constexpr struct {
  Retention retention;
  std::string_view name;
} kRetentions[] = {
    {Retention::kPinned, "pinned"},
    {Retention::kDemotable, "demotable"},
    {Retention::kEvictable, "evictable"},
};

}  // namespace

absl::StatusOr<Retention> ParseRetention(std::string_view text) {
  const absl::string_view name =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (name.empty()) return Retention::kPinned;
  for (const auto& entry : kRetentions) {
    if (std::string_view(name.data(), name.size()) == entry.name) return entry.retention;
  }
  // A hostile word of a megabyte is not echoed back.
  constexpr std::size_t kMaxEcho = 32;
  if (name.size() > kMaxEcho) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a retention of ", name.size(), " bytes is not one memd knows (pinned, demotable or "
        "evictable)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown retention '", name, "' (pinned, demotable or evictable)"));
}

std::string_view RetentionName(Retention retention) {
  for (const auto& entry : kRetentions) {
    if (entry.retention == retention) return entry.name;
  }
  return "pinned";
}

}  // namespace memd::broker
