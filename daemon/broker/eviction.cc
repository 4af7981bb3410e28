#include "daemon/broker/eviction.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::broker {
namespace {

// How far `held` is over the fair share total / uids, scaled by `uids` so
// that it stays an integer: held * uids - total.
__int128 OverShare(std::uint64_t held, std::uint64_t total, std::size_t uids) {
  return static_cast<__int128>(held) * static_cast<__int128>(uids) -
         static_cast<__int128>(total);
}

}  // namespace

absl::StatusOr<EvictionPlan> PlanEviction(absl::Span<const EvictionCandidate> candidates,
                                          absl::Span<const UidHolding> holdings,
                                          std::uint64_t need,
                                          std::optional<EvictionRequester> requester) {
  if (need == 0) return absl::InvalidArgumentError("eviction asked to free 0 bytes");
  absl::flat_hash_set<std::uint64_t> ids;
  std::uint64_t freeable = 0;
  std::uint64_t leased = 0;
  std::uint64_t pinned = 0;
  std::map<uid_t, std::deque<const EvictionCandidate*>> queues;
  std::map<uid_t, std::uint64_t> held;
  for (const UidHolding& holding : holdings) held[holding.uid] += holding.bytes;
  std::map<uid_t, std::uint64_t> candidate_bytes;
  for (const EvictionCandidate& candidate : candidates) {
    if (!ids.insert(candidate.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("eviction candidate ", candidate.id, " is listed twice"));
    }
    candidate_bytes[candidate.uid] += candidate.bytes;
    if (candidate.leased) {
      leased += candidate.bytes;
    } else if (candidate.pinned) {
      pinned += candidate.bytes;
    } else {
      freeable += candidate.bytes;
      queues[candidate.uid].push_back(&candidate);
    }
  }
  // A uid the holdings leave out holds at least its candidates.
  for (const auto& [uid, bytes] : candidate_bytes) held[uid] = std::max(held[uid], bytes);
  std::string over_share;  // Why only the requester's own data may go.
  if (requester.has_value()) {
    std::uint64_t total = requester->bytes;
    std::size_t uids = held[requester->uid] == 0 ? 1 : 0;
    for (const auto& [uid, bytes] : held) {
      total += bytes;
      if (bytes > 0) ++uids;
    }
    const std::uint64_t after = held[requester->uid] + requester->bytes;
    if (OverShare(after, total, uids) > 0) {
      over_share = absl::StrCat("; uid ", requester->uid, " would hold ", FormatBytes(after),
                                " of ", FormatBytes(total), " there, over its fair share (",
                                uids, " users), so only its own data may give way");
      for (auto it = queues.begin(); it != queues.end();) {
        if (it->first == requester->uid) {
          ++it;
          continue;
        }
        for (const EvictionCandidate* other : it->second) freeable -= other->bytes;
        it = queues.erase(it);
      }
    }
  }
  if (freeable < need) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "eviction could free ", freeable, " bytes (", FormatBytes(freeable), ") of the ", need,
        " (", FormatBytes(need), ") needed; ", leased, " bytes are leased and ", pinned,
        " pinned, which are never evicted", over_share));
  }
  for (auto& [uid, queue] : queues) {
    std::sort(queue.begin(), queue.end(),
              [](const EvictionCandidate* a, const EvictionCandidate* b) {
                return std::make_tuple(!a->demotable, a->last_used, a->id) <
                       std::make_tuple(!b->demotable, b->last_used, b->id);
              });
  }
  std::uint64_t total = 0;
  std::size_t uids = 0;
  for (const auto& [uid, bytes] : held) {
    total += bytes;
    if (bytes > 0) ++uids;
  }
  EvictionPlan plan;
  while (plan.bytes < need) {
    if (plan.victims.size() == kMaxVictimsPerPlan) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "freeing ", need, " bytes (", FormatBytes(need), ") would take more than ",
          kMaxVictimsPerPlan, " evictions; ", plan.bytes, " bytes after ",
          kMaxVictimsPerPlan));
    }
    // The uid whose next victim ranks first: a demotion before an
    // eviction, then the uid most over its share, then the oldest use.
    auto best = queues.end();
    for (auto it = queues.begin(); it != queues.end(); ++it) {
      if (it->second.empty()) continue;
      if (best == queues.end()) {
        best = it;
        continue;
      }
      const EvictionCandidate& mine = *it->second.front();
      const EvictionCandidate& theirs = *best->second.front();
      const auto rank = [&](const EvictionCandidate& c, uid_t uid) {
        return std::make_tuple(!c.demotable, -OverShare(held[uid], total, uids), c.last_used,
                               c.id);
      };
      if (rank(mine, it->first) < rank(theirs, best->first)) best = it;
    }
    const EvictionCandidate& victim = *best->second.front();
    best->second.pop_front();
    plan.victims.push_back(victim.id);
    plan.bytes += victim.bytes;
    std::uint64_t& bytes = held[best->first];
    bytes -= std::min(bytes, victim.bytes);
    total -= std::min(total, victim.bytes);
    if (bytes == 0 && uids > 0) --uids;
  }
  return plan;
}

}  // namespace memd::broker
