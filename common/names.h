#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace memd {

inline constexpr std::size_t kMaxNameBytes = 255;

// Checks a buffer name: 1..255 bytes of [A-Za-z0-9._/-], split by '/' into
// non-empty parts none of which is "." or "..". Returns INVALID_ARGUMENT with
// the reason (and the offending byte's position) otherwise.
absl::Status ValidateBufferName(std::string_view name);

// 'text' for a message: at most 64 bytes of it shown, escaped (a client's
// bytes go back to it readable and bounded).
std::string QuotedForMessage(std::string_view text);

}  // namespace memd
