#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "daemon/pool/arena.h"
#include "daemon/pool/segment_space.h"

namespace memd::pool {

// Finding idle segments (no live allocation) across a pool's arenas and
// detaching them: what trim, the idle budget, the limit and domain changes
// give back or move. Each function takes the arena and cache locks it needs
// and none of the caller's; thread-safe as the arenas are. A segment held
// elsewhere (PoolSegment::HeldElsewhere) is never detached. The caller owns
// what is detached and gives it back or adopts it elsewhere.

// An idle segment seen in a scan: values only, since it may be gone by the
// time they are read.
struct IdleSegment {
  Arena* arena;
  PoolSegment* segment;  // Compared, never followed, until confirmed.
  std::uint64_t size;
  std::uint64_t seq;
};

// Detaches the idle segments `choose` picks among all idle ones nobody else
// holds; `choose` runs with no lock held, and a pick that was used, moved or
// freed meanwhile is skipped. `saw_held`: whether idle segments held
// elsewhere were passed over.
using IdleChooser = std::function<std::vector<IdleSegment>(std::vector<IdleSegment>)>;
std::vector<std::unique_ptr<PoolSegment>> DetachIdle(const std::vector<Arena*>& arenas,
                                                     const IdleChooser& choose,
                                                     bool* saw_held);

// Detaches every segment that has been idle, and untouched by an allocation,
// for at least `min_idle_ns` as of `now_ns` (0: every idle one). Each look
// dates the segments it first sees idle (PoolSegment::idle_since_ns); one
// held elsewhere keeps its date and goes at the first look once let go.
std::vector<std::unique_ptr<PoolSegment>> DetachIdleFor(const std::vector<Arena*>& arenas,
                                                        std::int64_t now_ns,
                                                        std::int64_t min_idle_ns);

// Detaches, from an arena other than `thief`, the smallest idle segment of
// the kind `small` with at least `bytes` (ties: the oldest), of `thief`'s
// NUMA node; nullptr if none.
std::unique_ptr<PoolSegment> StealIdle(const std::vector<Arena*>& arenas,
                                       const Arena& thief, bool small,
                                       std::uint64_t bytes);

// Bytes of idle segments that stay because someone else holds them; for
// messages.
std::uint64_t HeldIdleBytes(const std::vector<Arena*>& arenas);

}  // namespace memd::pool
