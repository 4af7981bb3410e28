#include "daemon/broker/usage_tracker.h"

#include <algorithm>

namespace memd::broker {
namespace {

bool HostSide(const Location& at) { return at.kind != Location::Kind::kDevice; }

// The bucket a time falls in: whole minutes since the epoch, rounded down
// (also before 1970, which only a broken clock gives).
std::int64_t MinuteOf(absl::Time now) {
  return absl::ToInt64Minutes(absl::Floor(now - absl::UnixEpoch(), UsageTracker::kBucket));
}

}  // namespace

CopyDirection DirectionOf(const Location& from, const Location& to) {
  if (HostSide(from)) return HostSide(to) ? CopyDirection::kHostToHost : CopyDirection::kHostToDevice;
  return HostSide(to) ? CopyDirection::kDeviceToHost : CopyDirection::kDeviceToDevice;
}

std::string_view CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice:
      return "host_to_device";
    case CopyDirection::kDeviceToHost:
      return "device_to_host";
    case CopyDirection::kDeviceToDevice:
      return "device_to_device";
    case CopyDirection::kHostToHost:
      return "host_to_host";
  }
  return "unknown";
}

UsageTracker::Bucket& UsageTracker::BucketAt(Record& record, absl::Time now) {
  std::int64_t minute = MinuteOf(now);
  std::vector<Bucket>& window = record.window;
  // A clock that stepped back counts into the newest bucket: reopening an
  // older one would break the oldest-first order the expiry relies on.
  if (!window.empty()) minute = std::max(minute, window.back().minute);
  const std::int64_t oldest_kept = minute - kWindowBuckets + 1;
  const auto expired = std::find_if(window.begin(), window.end(),
                                    [&](const Bucket& b) { return b.minute >= oldest_kept; });
  window.erase(window.begin(), expired);
  if (window.empty() || window.back().minute != minute) window.emplace_back().minute = minute;
  return window.back();
}

void UsageTracker::Opened(std::uint64_t id, const Location& at, std::uint32_t uid,
                          absl::Time now, bool copy_avoided) {
  Record& record = records_[id];
  // The latest, should the clock step back.
  record.last_used = std::max(record.last_used.value_or(now), now);
  if (copy_avoided) ++record.copies_avoided;

  auto uid_entry = record.opens_by_uid.find(uid);
  if (uid_entry == record.opens_by_uid.end()) {
    // kOtherUids is a key of its own once present, hence the count without it.
    const std::size_t named = record.opens_by_uid.size() -
                              (record.opens_by_uid.contains(kOtherUids) ? 1 : 0);
    uid_entry = record.opens_by_uid.emplace(named < kMaxUids ? uid : kOtherUids, 0).first;
  }
  ++uid_entry->second;

  auto location = record.locations.find(at);
  if (location == record.locations.end()) {
    if (record.locations.size() >= kMaxLocations) {
      ++record.other_location_opens;
      return;
    }
    location = record.locations.emplace(at, AtLocation{}).first;
  }
  ++location->second.opens;
  location->second.last_opened = std::max(location->second.last_opened, now);
  ++BucketAt(record, now).opens[at];
}

void UsageTracker::Copied(std::uint64_t id, const Location& from, const Location& to,
                          std::uint64_t bytes, absl::Time now) {
  Record& record = records_[id];
  ++record.lazy_copies;
  record.bytes_copied[std::string(CopyDirectionName(DirectionOf(from, to)))] += bytes;
  BucketAt(record, now).bytes_copied += bytes;
}

void UsageTracker::Forget(std::uint64_t id) { records_.erase(id); }

BufferUsage UsageTracker::Of(std::uint64_t id) const {
  BufferUsage usage;
  auto found = records_.find(id);
  if (found == records_.end()) return usage;
  const Record& record = found->second;
  for (const auto& [location, at] : record.locations) {
    usage.opens_by_location[location.ToString()] = at.opens;
  }
  if (record.other_location_opens != 0) {
    usage.opens_by_location[std::string(kOtherLocations)] = record.other_location_opens;
  }
  usage.opens_by_uid = record.opens_by_uid;
  usage.lazy_copies = record.lazy_copies;
  usage.bytes_copied = record.bytes_copied;
  usage.copies_avoided = record.copies_avoided;
  usage.last_used = record.last_used;
  return usage;
}

std::optional<absl::Time> UsageTracker::LastUsed(std::uint64_t id) const {
  auto found = records_.find(id);
  return found == records_.end() ? std::nullopt : found->second.last_used;
}

BufferActivity UsageTracker::Activity(std::uint64_t id, absl::Time now) const {
  BufferActivity activity;
  auto found = records_.find(id);
  if (found == records_.end()) return activity;
  const Record& record = found->second;
  const std::int64_t oldest_kept = MinuteOf(now) - kWindowBuckets + 1;
  for (const auto& [location, at] : record.locations) {
    activity.locations.push_back({location, 0, at.last_opened});
  }
  for (const Bucket& bucket : record.window) {
    if (bucket.minute < oldest_kept) continue;
    activity.recent_bytes_copied += bucket.bytes_copied;
    for (const auto& [location, opens] : bucket.opens) {
      // Both lists are in LocationOrder and every bucket location has an entry.
      auto entry = std::lower_bound(
          activity.locations.begin(), activity.locations.end(), location,
          [](const LocationActivity& a, const Location& b) { return LocationOrder()(a.location, b); });
      entry->recent_opens += opens;
    }
  }
  return activity;
}

}  // namespace memd::broker
