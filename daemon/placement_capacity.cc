#include "daemon/placement_capacity.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace memd {

std::optional<broker::Capacity> ParseMeminfo(std::string_view text) {
  std::optional<std::uint64_t> available;
  std::optional<std::uint64_t> total;
  // Lines read "MemAvailable:   12345678 kB".
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::optional<std::uint64_t>* field = nullptr;
    if (absl::ConsumePrefix(&line, "MemAvailable:")) field = &available;
    if (absl::ConsumePrefix(&line, "MemTotal:")) field = &total;
    if (field == nullptr) continue;
    line = absl::StripAsciiWhitespace(line);
    std::uint64_t kib = 0;
    if (!absl::ConsumeSuffix(&line, "kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib > (~0ull >> 10)) {
      return std::nullopt;
    }
    *field = kib << 10;
  }
  if (!available || !total) return std::nullopt;
  return broker::Capacity{*available, *total};
}

PlacementCapacity::PlacementCapacity(const backend::Backend& backend, std::string meminfo)
    : backend_(backend), meminfo_(std::move(meminfo)) {}

std::vector<std::optional<broker::Capacity>> PlacementCapacity::Of(
    const std::vector<Location>& locations) const {
  std::optional<std::optional<broker::Capacity>> host;
  std::optional<std::vector<backend::DeviceInfo>> devices;
  std::vector<std::optional<broker::Capacity>> out;
  out.reserve(locations.size());
  for (const Location& location : locations) {
    if (location.kind != Location::Kind::kDevice) {
      if (!host) {
        std::ifstream in(meminfo_);
        std::stringstream text;
        text << in.rdbuf();
        host = in ? ParseMeminfo(text.str()) : std::nullopt;
      }
      out.push_back(*host);
      continue;
    }
    // One query of every device for all of them: the driver is asked per
    // device either way.
    if (!devices) devices = backend_.devices();
    std::optional<broker::Capacity> found;
    for (const backend::DeviceInfo& device : *devices) {
      if (device.ordinal == location.device) {
        found = broker::Capacity{device.free_bytes, device.total_bytes};
      }
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace memd
