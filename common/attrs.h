#pragma once

// A buffer's attributes: a few small key=value pairs set at its Create and
// returned with it (Open, Stat, List), so that a consumer can turn a name
// into a typed array without a side channel: dtype=float16,
// shape=4096,4096, layout=row-major, and keys of the creator's own.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memd {

// Sorted by key; keys are unique.
using BufferAttrs = std::map<std::string, std::string>;

inline constexpr std::size_t kMaxAttrs = 16;
inline constexpr std::size_t kMaxAttrKeyBytes = 64;
inline constexpr std::size_t kMaxAttrValueBytes = 256;
// Keys and values together: what one buffer's attributes may hold.
inline constexpr std::size_t kMaxAttrsBytes = 1024;

// INVALID_ARGUMENT naming the key, the byte or the limit: more than
// kMaxAttrs, a key of 0 or more than kMaxAttrKeyBytes bytes or with a byte
// outside [A-Za-z0-9._-], a value longer than kMaxAttrValueBytes or with a
// byte outside printable ASCII (0x20-0x7e), or more than kMaxAttrsBytes in
// all.
absl::Status ValidateAttrs(const BufferAttrs& attrs);

// "key=value" (the first '=' splits; the value may be empty), for command
// lines. INVALID_ARGUMENT without '='. Does not validate.
absl::StatusOr<std::pair<std::string, std::string>> ParseAttr(std::string_view text);

}  // namespace memd
