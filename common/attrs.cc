#include "common/attrs.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"

namespace memd {
namespace {

bool IsKeyByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

bool IsValueByte(char c) { return c >= 0x20 && c <= 0x7e; }

absl::Status ValidateKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("attribute key is empty");
  if (key.size() > kMaxAttrKeyBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attribute key %s is %d bytes long; the limit is %d", QuotedForMessage(key), key.size(),
        kMaxAttrKeyBytes));
  }
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (!IsKeyByte(key[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attribute key %s has byte 0x%02x at position %d; keys use only [A-Za-z0-9._-]",
          QuotedForMessage(key), static_cast<unsigned char>(key[i]), i));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(const std::string& key, const std::string& value) {
  if (value.size() > kMaxAttrValueBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attribute %s has a value of %d bytes; the limit is %d", QuotedForMessage(key), value.size(),
        kMaxAttrValueBytes));
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!IsValueByte(value[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attribute %s has byte 0x%02x at position %d of its value; values are "
          "printable ASCII (0x20-0x7e)",
          QuotedForMessage(key), static_cast<unsigned char>(value[i]), i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAttrs(const BufferAttrs& attrs) {
  if (attrs.size() > kMaxAttrs) {
    return absl::InvalidArgumentError(absl::StrCat(
        attrs.size(), " attributes given; the limit is ", kMaxAttrs));
  }
  std::size_t bytes = 0;
  for (const auto& [key, value] : attrs) {
    if (absl::Status valid = ValidateKey(key); !valid.ok()) return valid;
    if (absl::Status valid = ValidateValue(key, value); !valid.ok()) return valid;
    bytes += key.size() + value.size();
  }
  if (bytes > kMaxAttrsBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attributes take ", bytes, " bytes (keys and values); the limit is ", kMaxAttrsBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> ParseAttr(std::string_view text) {
  const std::size_t equals = text.find('=');
  if (equals == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute ", QuotedForMessage(text), " is not KEY=VALUE"));
  }
  return std::make_pair(std::string(text.substr(0, equals)),
                        std::string(text.substr(equals + 1)));
}

}  // namespace memd
