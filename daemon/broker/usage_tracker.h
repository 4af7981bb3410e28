#pragma once

// Usage tracking: what memd counts of each buffer's use, for the buffer's
// info (BufferUsage), for metrics, and for advice (daemon/broker/advice.h).
//
// Per buffer id: leases granted by location and by uid, copies into replicas
// and the bytes they moved by direction, opens away from the home served by
// a replica that was there already ("copies avoided"), when it was last
// opened (in all and per location), and a window of the last hour (opens per
// location and bytes copied, in one-minute buckets) that advice reads.
//
// Pure bookkeeping: no broker state, no locks, no clock (every call takes
// `now`). Not yet wired into the broker.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/location.h"

namespace memd::broker {

// Report order of locations: host, pinned, device:0, device:1, ...
struct LocationOrder {
  bool operator()(const Location& a, const Location& b) const {
    if (a.kind != b.kind) return static_cast<int>(a.kind) < static_cast<int>(b.kind);
    return a.device < b.device;
  }
};

// The direction of a copy into a replica; "host" is host or pinned memory.
enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };
CopyDirection DirectionOf(const Location& from, const Location& to);
// "host_to_device", "device_to_host", "device_to_device", "host_to_host":
// the keys of BufferUsage::bytes_copied and of the protocol's map.
std::string_view CopyDirectionName(CopyDirection direction);

// What memd counted of one buffer since it was created or memd started; the
// protocol's BufferUsage, field by field.
struct BufferUsage {
  // Leases granted, by location ("host", "device:0", ...; past the location
  // cap, under "other") and by uid (past the uid cap, under kOtherUids).
  std::map<std::string, std::uint64_t> opens_by_location;
  std::map<std::uint32_t, std::uint64_t> opens_by_uid;
  // Copies into replicas (made, or brought up to date: lazy or prefetched).
  std::uint64_t lazy_copies = 0;
  // Bytes those copies moved, by CopyDirectionName; directions never used
  // are absent.
  std::map<std::string, std::uint64_t> bytes_copied;
  // Opens away from the home served by a replica that was there already.
  std::uint64_t copies_avoided = 0;
  // The last open; nullopt: never opened since memd started (a copy is not
  // a use: a prefetch must not make a buffer look busy).
  std::optional<absl::Time> last_used;
};

// One location's share of a buffer's use, for advice.
struct LocationActivity {
  Location location;
  std::uint64_t recent_opens = 0;  // In the window (UsageTracker::kWindow).
  absl::Time last_opened;          // Ever (since memd started).
};

// The recent part of a buffer's use, for advice: the window is the bucket
// holding `now` and the kWindowBuckets - 1 before it, so it covers between
// 59 and 60 minutes of history; an event older than that has left it.
struct BufferActivity {
  // Every location the buffer was opened at (up to the location cap), in
  // LocationOrder, including those with no open in the window.
  std::vector<LocationActivity> locations;
  std::uint64_t recent_bytes_copied = 0;
};

// Usage counters for every buffer the broker holds, by buffer id: opens by
// location and by uid, copies and their bytes by direction, copies avoided,
// last use, and a sliding window of the last hour for advice.
//
// Memory per buffer is bounded whatever clients do: at most kMaxUids uids
// are named (the opens of any further uid count under kOtherUids), at most
// kMaxLocations locations (further ones count under "other" and in no
// window or per-location time), and the window holds at most
// kWindowBuckets buckets, each with at most kMaxLocations entries. A record
// exists from a buffer's first event until Forget.
//
// No method fails: an unknown id reads as a buffer never used. Time going
// backwards (a clock step) counts into the newest bucket rather than
// reopening an old one.
//
// Thread-compatible: it lives under the broker's lock.
class UsageTracker {
 public:
  // The key of opens_by_uid that counts every uid past the first kMaxUids:
  // (uid_t)-1, which Linux never gives a process (it means "unchanged" to
  // setreuid).
  static constexpr std::uint32_t kOtherUids = 0xFFFFFFFFu;
  // The key of opens_by_location past the first kMaxLocations.
  static constexpr std::string_view kOtherLocations = "other";
  static constexpr std::size_t kMaxUids = 32;
  // host, pinned and 32 devices: more than any node has, so "other" stays
  // empty unless the caller passes locations the node does not have.
  static constexpr std::size_t kMaxLocations = 34;
  static constexpr absl::Duration kBucket = absl::Minutes(1);
  static constexpr int kWindowBuckets = 60;
  static constexpr absl::Duration kWindow = absl::Minutes(kWindowBuckets);  // kBucket each.

  // A lease on buffer `id` granted at `at` to `uid`. `copy_avoided`: the
  // open was away from the buffer's home and a replica that was there
  // already served it (no copy was made for it).
  void Opened(std::uint64_t id, const Location& at, std::uint32_t uid, absl::Time now,
              bool copy_avoided);
  // A copy of `bytes` into the replica at `to` from the one at `from` ended
  // well (a lazy fill at an open, a refresh, or a prefetch).
  void Copied(std::uint64_t id, const Location& from, const Location& to, std::uint64_t bytes,
              absl::Time now);
  // The buffer was freed: its record goes.
  void Forget(std::uint64_t id);

  // The counters of `id` (all zero and empty for an id never seen).
  BufferUsage Of(std::uint64_t id) const;
  // Of(id).last_used without copying the counters (the leak report asks
  // it of every buffer at each metrics scrape).
  std::optional<absl::Time> LastUsed(std::uint64_t id) const;
  // The window of `id` as of `now`.
  BufferActivity Activity(std::uint64_t id, absl::Time now) const;
  // Buffers with a record.
  std::size_t size() const { return records_.size(); }

 private:
  struct Bucket {
    std::int64_t minute = 0;  // Minutes since the Unix epoch.
    std::uint64_t bytes_copied = 0;
    std::map<Location, std::uint64_t, LocationOrder> opens;
  };
  struct AtLocation {
    std::uint64_t opens = 0;
    absl::Time last_opened = absl::InfinitePast();
  };
  struct Record {
    std::map<Location, AtLocation, LocationOrder> locations;  // At most kMaxLocations.
    std::uint64_t other_location_opens = 0;
    std::map<std::uint32_t, std::uint64_t> opens_by_uid;  // At most kMaxUids + 1 keys.
    std::uint64_t lazy_copies = 0;
    std::map<std::string, std::uint64_t> bytes_copied;  // At most 4 keys.
    std::uint64_t copies_avoided = 0;
    std::optional<absl::Time> last_used;
    std::vector<Bucket> window;  // Oldest first, at most kWindowBuckets.
  };

  // The bucket for `now` in `record`, made (and the expired ones dropped)
  // as needed.
  static Bucket& BucketAt(Record& record, absl::Time now);

  absl::flat_hash_map<std::uint64_t, Record> records_;
};

}  // namespace memd::broker
