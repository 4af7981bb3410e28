#pragma once

// Retention: what memd may take back of a buffer when a location is full
// (docs/design.md, "Under memory pressure"). Chosen by the creator; the
// default keeps everything, so that no existing client loses data.

#include <string_view>

#include "absl/status/statusor.h"

namespace memd::broker {

enum class Retention {
  kPinned,     // Never taken: neither the buffer nor its copies (default).
  kDemotable,  // Its copies away from home may be dropped while nobody
               // holds them and another copy is current (a demotion: the
               // next open there makes the copy again); the buffer stays.
  kEvictable,  // Also the whole buffer, when nobody holds it (an eviction:
               // its name goes, and an open says it was evicted).
};

// "pinned", "demotable", "evictable"; "" reads as pinned. Errors:
// INVALID_ARGUMENT naming the choices.
absl::StatusOr<Retention> ParseRetention(std::string_view text);
std::string_view RetentionName(Retention retention);

}  // namespace memd::broker
