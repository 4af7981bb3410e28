#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace memd {

// Where a buffer's memory lives: "host" (shared memory), "pinned" (shared
// memory locked in RAM / registered with a GPU driver) or "device:N".
struct Location {
  enum class Kind { kHost, kPinned, kDevice };

  Kind kind = Kind::kHost;
  int device = 0;  // Only for kDevice.

  static Location Host() { return {Kind::kHost, 0}; }
  static Location Pinned() { return {Kind::kPinned, 0}; }
  static Location Device(int ordinal) { return {Kind::kDevice, ordinal}; }

  // Parses "host", "pinned", "device:N"; empty means host. Errors:
  // INVALID_ARGUMENT naming the text and the accepted forms.
  static absl::StatusOr<Location> Parse(std::string_view text);

  std::string ToString() const;

  friend bool operator==(const Location&, const Location&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Location& location) {
    return H::combine(std::move(h), location.kind, location.device);
  }
};

}  // namespace memd
