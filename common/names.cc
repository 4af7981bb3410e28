#include "common/names.h"

#include <algorithm>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace memd {
namespace {

bool IsNameByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '/' || c == '-';
}

}  // namespace

std::string QuotedForMessage(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string shown = absl::CHexEscape(
      absl::string_view(text.data(), std::min(text.size(), kShown)));
  if (text.size() > kShown) shown += "...";
  return absl::StrCat("'", shown, "'");
}

absl::Status ValidateBufferName(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("buffer name is empty");
  }
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "buffer name %s is %d bytes long; the limit is %d", QuotedForMessage(name),
        name.size(), kMaxNameBytes));
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!IsNameByte(name[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "buffer name %s has byte 0x%02x at position %d; names use only "
          "[A-Za-z0-9._/-]",
          QuotedForMessage(name), static_cast<unsigned char>(name[i]), i));
    }
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer name ", QuotedForMessage(name),
          " has an empty part (leading, trailing or doubled '/')"));
    }
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer name ", QuotedForMessage(name), " has a '", std::string(part),
          "' part; parts may not be '.' or '..'"));
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

}  // namespace memd
