#pragma once

// Eviction under memory pressure (issue 26, not wired yet): which unleased,
// evictable memory at one location to take back, and in which order, so
// that a create, a replica or a copy that does not fit can be served.
//
// Order (every step re-ranks, since each choice changes a uid's bytes):
//   1. demotions before evictions: a demotion drops a copy whose buffer
//      stays current elsewhere (nothing is lost; the next open re-makes
//      it), an eviction drops a whole buffer;
//   2. the uid most over its fair share at the location first (its bytes
//      there minus total / uids holding bytes there): one user's flood is
//      paid for by that user before anyone else (Plasma's global LRU let a
//      fast producer evict slow readers' data);
//   3. least recently used first; ties by id.
// Never a leased candidate, never a pinned one. A requester that would
// hold more than its fair share of the location with what it asks takes
// back only its own data: else a uid whose data may not go (pinned, held)
// could push everyone else's out, again after each re-open (thrashing
// them), while it sits over its share. A plan that cannot free
// enough takes nothing: evicting without serving the request would only
// lose data.
//
// Pure policy: no broker state, no locks, no clock.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace memd::broker {

// Memory at one location that eviction might take back.
struct EvictionCandidate {
  std::uint64_t id = 0;  // The record: a buffer, or a copy of one.
  uid_t uid = 0;         // Whose quota its bytes count against.
  std::uint64_t bytes = 0;
  absl::Time last_used;  // Its last open (or creation, never opened).
  // A copy whose buffer has another current copy: dropping it loses
  // nothing (a demotion). Else dropping it drops the buffer.
  bool demotable = false;
  bool leased = false;   // Someone maps it: never taken.
  bool pinned = false;   // Retention "pinned": never taken.
};

// What one uid holds at the location, evictable or not: the shares are of
// everything there.
struct UidHolding {
  uid_t uid = 0;
  std::uint64_t bytes = 0;
};

// Who asks for the room, and how many bytes it asks for.
struct EvictionRequester {
  uid_t uid = 0;
  std::uint64_t bytes = 0;
};

struct EvictionPlan {
  std::vector<std::uint64_t> victims;  // In the order chosen.
  std::uint64_t bytes = 0;             // What they free together.
};

// At most this many victims in one plan: what one request may cost the
// broker's lock, and other users' data.
inline constexpr std::size_t kMaxVictimsPerPlan = 1024;

// Chooses victims freeing at least `need` bytes. `holdings` lists each uid's
// bytes at the location (a candidate's uid missing there counts as holding
// just its candidates). With `requester`, only its own candidates when it
// would be over its fair share (its bytes plus those asked, times the uids
// holding bytes there with it, above the total plus those asked). Errors:
// RESOURCE_EXHAUSTED when everything evictable (unleased, not pinned, the
// requester's own if so) frees less than `need`, or more than
// kMaxVictimsPerPlan victims would be needed (the message gives need, what
// could be freed and how much is leased or pinned, or the requester's
// share); INVALID_ARGUMENT for need 0 or an id twice.
absl::StatusOr<EvictionPlan> PlanEviction(
    absl::Span<const EvictionCandidate> candidates, absl::Span<const UidHolding> holdings,
    std::uint64_t need, std::optional<EvictionRequester> requester = std::nullopt);

}  // namespace memd::broker
