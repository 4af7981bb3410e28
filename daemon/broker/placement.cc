#include "daemon/broker/placement.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/bytes.h"

namespace memd::broker {
namespace {

// absl::string_view is its own type in Debian's Abseil.
std::string_view Std(absl::string_view text) { return {text.data(), text.size()}; }
absl::string_view Absl(std::string_view text) { return {text.data(), text.size()}; }

constexpr struct {
  AccessHint hint;
  std::string_view name;
} kHints[] = {
    {AccessHint::kNone, "none"},
    {AccessHint::kDeviceFrequent, "device_frequent"},
    {AccessHint::kHostFrequent, "host_frequent"},
    {AccessHint::kReadMostly, "read_mostly"},
    {AccessHint::kStreaming, "streaming"},
};

// One place a rule tries, in order.
enum class Step { kPinned, kHost, kDeviceHolds, kDeviceComfortably };

bool Holds(const PlacementCandidate& candidate, std::uint64_t size) {
  return candidate.free_bytes >= size;
}

// Whether `headroom_percent` of the device's total stays free after `size`.
bool Comfortable(const PlacementCandidate& device, std::uint64_t size, int headroom_percent) {
  if (!Holds(device, size)) return false;
  const unsigned __int128 left = device.free_bytes - size;
  return left * 100 >= static_cast<unsigned __int128>(device.total_bytes) *
                           static_cast<unsigned>(headroom_percent);
}

// Whole percent of the device's total left free after `size` (floor).
std::uint64_t PercentLeft(const PlacementCandidate& device, std::uint64_t size) {
  if (device.total_bytes == 0) return 0;
  const unsigned __int128 left = device.free_bytes - size;
  return static_cast<std::uint64_t>(left * 100 / device.total_bytes);
}

// The device with the most free bytes among those `fits` accepts; ties go to
// the lowest ordinal.
template <typename Fits>
const PlacementCandidate* MostFree(const std::vector<const PlacementCandidate*>& devices,
                                   Fits fits) {
  const PlacementCandidate* best = nullptr;
  for (const PlacementCandidate* device : devices) {
    if (!fits(*device)) continue;
    if (best == nullptr || device->free_bytes > best->free_bytes ||
        (device->free_bytes == best->free_bytes &&
         device->location.device < best->location.device)) {
      best = device;
    }
  }
  return best;
}

// Exact where FormatBytes would round ("65535 B (~64 KiB)"), so that a size
// just under a threshold never reads as equal to it.
std::string Bytes(std::uint64_t bytes) {
  std::string text = FormatBytes(bytes);
  absl::StatusOr<std::uint64_t> back = ParseBytes(text);
  if (back.ok() && *back == bytes) return text;
  return absl::StrCat(bytes, " B (~", text, ")");
}

// Informational, so rounded: "12 GiB of 16 GiB".
std::string Share(const PlacementCandidate& device) {
  return absl::StrCat(FormatBytes(device.free_bytes), " of ", FormatBytes(device.total_bytes));
}

}  // namespace

absl::StatusOr<AccessHint> ParseAccessHint(std::string_view text) {
  const absl::string_view name =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (name.empty()) return AccessHint::kNone;
  for (const auto& entry : kHints) {
    if (Std(name) == entry.name) return entry.hint;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown access hint '", name,
      "' (none, device_frequent, host_frequent, read_mostly or streaming)"));
}

std::string_view AccessHintName(AccessHint hint) {
  for (const auto& entry : kHints) {
    if (entry.hint == hint) return entry.name;
  }
  return "none";
}

absl::StatusOr<PlacementRules> PlacementRules::Parse(std::string_view text) {
  PlacementRules rules;
  const absl::string_view whole =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (whole.empty()) return rules;
  auto refuse = [&](auto&&... why) {
    return absl::InvalidArgumentError(absl::StrCat("placement '", whole, "': ", why...));
  };
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view part : absl::StrSplit(whole, ',')) {
    std::vector<absl::string_view> sides = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (sides.size() != 2) {
      return refuse("'", part, "' is not KEY=VALUE (small=SIZE, medium=SIZE, headroom=N%)");
    }
    const absl::string_view key = absl::StripAsciiWhitespace(sides[0]);
    const absl::string_view value = absl::StripAsciiWhitespace(sides[1]);
    if (!seen.insert(std::string(key)).second) return refuse(key, " is given twice");
    if (key == "small" || key == "medium") {
      absl::StatusOr<std::uint64_t> bytes = ParseBytes(Std(value));
      if (!bytes.ok()) return refuse(key, ": ", bytes.status().message());
      (key == "small" ? rules.small : rules.medium) = *bytes;
    } else if (key == "headroom") {
      absl::string_view number = value;
      absl::ConsumeSuffix(&number, "%");
      int percent = -1;
      if (!absl::SimpleAtoi(number, &percent) || percent < 0 || percent > 99) {
        return refuse("headroom '", value, "' is not a whole percentage from 0% to 99%");
      }
      rules.headroom_percent = percent;
    } else {
      return refuse("unknown key '", key, "' (small, medium or headroom)");
    }
  }
  if (rules.medium < rules.small) {
    return refuse("medium (", FormatBytes(rules.medium), ") is below small (",
                  FormatBytes(rules.small), ")");
  }
  return rules;
}

absl::StatusOr<PlacementDecision> Place(const PlacementRequest& request,
                                        absl::Span<const PlacementCandidate> candidates,
                                        const PlacementRules& rules) {
  const std::uint64_t size = request.size;
  if (size == 0) {
    return absl::InvalidArgumentError("cannot place 0 bytes: a buffer holds at least one");
  }
  absl::flat_hash_set<Location> listed;
  std::vector<const PlacementCandidate*> usable;
  std::vector<const PlacementCandidate*> devices;
  std::vector<std::string> unmappable;
  const PlacementCandidate* host = nullptr;
  const PlacementCandidate* pinned = nullptr;
  bool unmappable_device = false;
  bool unmappable_host = false;
  bool unmappable_pinned = false;
  for (const PlacementCandidate& candidate : candidates) {
    if (!listed.insert(candidate.location).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement candidates list ", candidate.location.ToString(), " twice"));
    }
    const Location::Kind kind = candidate.location.kind;
    if (!candidate.mappable) {
      unmappable.push_back(candidate.location.ToString());
      (kind == Location::Kind::kDevice  ? unmappable_device
       : kind == Location::Kind::kHost ? unmappable_host
                                        : unmappable_pinned) = true;
      continue;
    }
    usable.push_back(&candidate);
    if (kind == Location::Kind::kDevice) devices.push_back(&candidate);
    if (kind == Location::Kind::kHost) host = &candidate;
    if (kind == Location::Kind::kPinned) pinned = &candidate;
  }
  if (usable.empty()) {
    if (unmappable.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no candidate locations to place ", Bytes(size), " in"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "no candidate location this process can map to place ", Bytes(size), " in (",
        absl::StrJoin(unmappable, ", "), " cannot be mapped)"));
  }

  const std::string size_text = Bytes(size);
  std::string head;
  std::vector<Step> steps;
  switch (request.hint) {
    case AccessHint::kNone:
      if (size < rules.small) {
        head = absl::StrCat(size_text, " is under ", Bytes(rules.small));
        steps = {Step::kPinned, Step::kHost, Step::kDeviceHolds};
      } else if (size <= rules.medium) {
        head = absl::StrCat(size_text, " is in ", Bytes(rules.small), "-",
                            Bytes(rules.medium));
        steps = {Step::kDeviceHolds, Step::kHost, Step::kPinned};
      } else {
        head = absl::StrCat(size_text, " is over ", Bytes(rules.medium));
        steps = {Step::kDeviceComfortably, Step::kHost, Step::kPinned, Step::kDeviceHolds};
      }
      break;
    case AccessHint::kDeviceFrequent:
      steps = {Step::kDeviceHolds, Step::kPinned, Step::kHost};
      break;
    case AccessHint::kHostFrequent:
      steps = {Step::kHost, Step::kPinned, Step::kDeviceHolds};
      break;
    case AccessHint::kReadMostly:
      steps = {Step::kDeviceComfortably, Step::kHost, Step::kPinned, Step::kDeviceHolds};
      break;
    case AccessHint::kStreaming:
      steps = {Step::kPinned, Step::kHost, Step::kDeviceHolds};
      break;
  }
  if (head.empty()) {
    head = absl::StrCat(size_text, " with hint ", Absl(AccessHintName(request.hint)));
  }

  // Each step either chooses (and says why) or adds why it could not.
  std::vector<std::string> passed;
  for (Step step : steps) {
    std::optional<PlacementDecision> chosen;
    switch (step) {
      case Step::kPinned:
      case Step::kHost: {
        const bool is_pinned = step == Step::kPinned;
        const PlacementCandidate* where = is_pinned ? pinned : host;
        const absl::string_view name = is_pinned ? "pinned" : "host";
        if (where == nullptr) {
          passed.push_back((is_pinned ? unmappable_pinned : unmappable_host)
                               ? absl::StrCat(name, " cannot be mapped by this process")
                               : absl::StrCat("no ", name, " memory here"));
        } else if (!Holds(*where, size)) {
          passed.push_back(absl::StrCat(name, " has only ", Bytes(where->free_bytes),
                                        " free"));
        } else {
          chosen = PlacementDecision{where->location, std::string(name)};
        }
        break;
      }
      case Step::kDeviceHolds:
      case Step::kDeviceComfortably: {
        const bool comfortably = step == Step::kDeviceComfortably;
        if (devices.empty()) {
          passed.push_back(unmappable_device ? "no device this process can map"
                                             : "no device here");
          break;
        }
        const PlacementCandidate* best = MostFree(devices, [&](const PlacementCandidate& d) {
          return comfortably ? Comfortable(d, size, rules.headroom_percent) : Holds(d, size);
        });
        const PlacementCandidate* roomiest =
            MostFree(devices, [](const PlacementCandidate&) { return true; });
        if (best == nullptr && !comfortably) {
          passed.push_back(absl::StrCat("no device has ", size_text, " free (most: ",
                                        roomiest->location.ToString(), ", ",
                                        Share(*roomiest), ")"));
        } else if (best == nullptr) {
          passed.push_back(absl::StrCat(
              "no device keeps ", rules.headroom_percent, "% free after it (most: ",
              roomiest->location.ToString(), ", ", Share(*roomiest), ")"));
        } else if (!comfortably) {
          chosen = PlacementDecision{
              best->location, absl::StrCat("device; ", best->location.ToString(),
                                           " has the most free (", Share(*best), ")")};
        } else {
          chosen = PlacementDecision{
              best->location,
              absl::StrCat("device; ", best->location.ToString(),
                           " has the most free of the devices keeping ",
                           rules.headroom_percent, "% after it (", Share(*best), ", ",
                           PercentLeft(*best, size), "% after)")};
        }
        break;
      }
    }
    if (chosen.has_value()) {
      std::string why = passed.empty()
                            ? absl::StrCat(head, ": ", chosen->rule)
                            : absl::StrCat(head, ": ", absl::StrJoin(passed, "; "), "; so ",
                                           chosen->rule);
      chosen->rule = std::move(why);
      return *std::move(chosen);
    }
  }

  // Every rule ends in every location kind, so nothing here holds it.
  std::vector<std::string> free;
  for (const PlacementCandidate* candidate : usable) {
    free.push_back(absl::StrCat(candidate->location.ToString(), " has ",
                                Bytes(candidate->free_bytes), " free"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no location can hold ", size_text, ": ", absl::StrJoin(free, ", ")));
}

}  // namespace memd::broker
