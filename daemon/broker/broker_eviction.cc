// Broker under memory pressure: when a location is full, unleased data whose
// retention allows it gives way (docs/design.md, "Under memory pressure").
// The order is eviction.h's; this file finds the candidates, takes the
// victims and remembers what it evicted, so that an open of the name says
// why it is gone.

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/broker_messages.h"
#include "daemon/broker/eviction.h"
#include "daemon/broker/permissions.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {
namespace {

// Rounds of "take back, allocate again": a pool whose free memory is
// scattered may refuse again after the first; each round takes at least
// what the request needs, so a few suffice.
constexpr int kPressureRounds = 3;

// The payload of a refusal because a location is full: the location and
// the bytes the request takes there, "device:0 1048576", so that a wait for
// memory knows what it waits for whatever was asked (a create, a copy).
constexpr char kLocationFull[] = "type.memd.dev/broker.LocationFull";

absl::Status Full(absl::Status refusal, const Location& at, std::uint64_t taken) {
  refusal.SetPayload(kLocationFull, absl::Cord(absl::StrCat(at.ToString(), " ", taken)));
  return refusal;
}

// Where a LocationFull refusal's request waits, and for how many bytes.
struct FullAt {
  Location at;
  std::uint64_t taken = 0;
};
std::optional<FullAt> ParseFull(const absl::Status& refusal) {
  const auto payload = refusal.GetPayload(kLocationFull);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const std::size_t space = text.rfind(' ');
  if (space == std::string::npos) return std::nullopt;
  absl::StatusOr<Location> at = Location::Parse(text.substr(0, space));
  std::uint64_t taken = 0;
  if (!at.ok() || !absl::SimpleAtoi(text.substr(space + 1), &taken)) return std::nullopt;
  return FullAt{*std::move(at), taken};
}

// What the first round must take back: what the request takes beyond the
// pool's room under its limit (its free reserved bytes count, since the
// pool reuses or trims them). At least one byte: the pool refused, so
// something must go even when the figures say there is room (scattered
// free memory, or a backend out of memory before the limit).
std::uint64_t Shortfall(const pool::Pool& pool, std::uint64_t taken) {
  const pool::PoolStats stats = pool.Stats();
  if (stats.limit_bytes == 0 || stats.used_bytes >= stats.limit_bytes) return taken;
  const std::uint64_t room = stats.limit_bytes - stats.used_bytes;
  return room >= taken ? taken : taken - room;
}

}  // namespace

absl::StatusOr<pool::Allocation> Broker::AllocateUnderPressure(pool::Pool& pool,
                                                               std::uint64_t size,
                                                               const pool::Domain& domain,
                                                               absl::Status refusal,
                                                               uid_t asker) {
  const std::uint64_t taken = pool.AllocationBytes(size);
  for (int round = 0; round < kPressureRounds; ++round) {
    if (!absl::IsResourceExhausted(refusal)) return refusal;
    const std::uint64_t need = round == 0 ? Shortfall(pool, taken) : taken;
    absl::StatusOr<std::uint64_t> taken_back = WithLock([&](AfterUnlock& after) {
      return MakeRoomLocked(pool.location(), need, after, std::nullopt,
                            EvictionRequester{asker, taken});
    });
    if (!taken_back.ok()) {
      return Full(absl::ResourceExhaustedError(
                      absl::StrCat(refusal.message(), "; nothing could give way: ",
                                   taken_back.status().message())),
                  pool.location(), taken);
    }
    // The victims' memory is back in the pool now (AfterUnlock ran).
    absl::StatusOr<pool::Allocation> allocation = pool.Allocate(size, domain);
    if (allocation.ok()) return allocation;
    refusal = allocation.status();
  }
  return absl::IsResourceExhausted(refusal) ? Full(refusal, pool.location(), taken)
                                            : refusal;
}

bool LocationFull(const absl::Status& status) {
  return status.GetPayload(kLocationFull).has_value();
}

absl::StatusOr<std::optional<Grant>> Broker::CreateOrWait(SessionId session,
                                                          const CreateParams& params,
                                                          WatchId watch,
                                                          std::function<void()> wake) {
  return TryOrWaitForMemory(
      session, watch, std::move(wake),
      [&](const std::function<void()>&) -> absl::StatusOr<std::optional<Grant>> {
        MEMD_ASSIGN_OR_RETURN(Grant grant, Create(session, params));
        return std::optional<Grant>(std::move(grant));
      });
}

absl::StatusOr<std::optional<Grant>> Broker::OpenOrCreateOrWait(SessionId session,
                                                                const CreateParams& params,
                                                                WatchId watch,
                                                                std::function<void()> wake) {
  return TryOrWaitForMemory(session, watch, std::move(wake),
                            [&](const std::function<void()>& woken) {
                              return OpenOrCreate(session, params, watch, woken);
                            });
}

absl::StatusOr<std::optional<Grant>> Broker::OpenOrWaitForMemory(SessionId session,
                                                                 const OpenParams& params,
                                                                 WatchId watch,
                                                                 std::function<void()> wake) {
  // Watched under the buffer's name: its unlink ends the wait.
  return TryOrWaitForMemory(session, watch, std::move(wake),
                            [&](const std::function<void()>& woken) {
                              return OpenOrWatch(session, params, watch, woken);
                            },
                            params.name);
}

bool Broker::WaitsForMemory(WatchId watch) const {
  absl::MutexLock lock(&mu_);
  return memory_waits_.contains(watch);
}

absl::StatusOr<std::optional<Grant>> Broker::TryOrWaitForMemory(
    SessionId session, WatchId watch, std::function<void()> wake,
    absl::FunctionRef<absl::StatusOr<std::optional<Grant>>(const std::function<void()>&)>
        attempt,
    const std::string& copy_of) {
  // Memory freed between the refusal and the wait would wake nobody: the
  // wait looks at the room again under the lock and tries once more.
  constexpr int kTries = 3;
  for (int tried = 1;; ++tried) {
    // An attempt that waits for something else (OpenOrCreate: a seal) took
    // a copy of the wake under the same watch: no longer a memory wait.
    absl::StatusOr<std::optional<Grant>> got = attempt(wake);
    if (got.ok() || !LocationFull(got.status())) {
      absl::MutexLock lock(&mu_);
      ForgetMemoryWaitLocked(watch);
      return got;
    }
    const std::optional<FullAt> full = ParseFull(got.status());
    if (!full.has_value()) return got.status();
    const Location& at = full->at;
    const std::uint64_t taken = full->taken;
    absl::StatusOr<bool> waits = [&]() -> absl::StatusOr<bool> {
      absl::MutexLock lock(&mu_);
      MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
      if (tried < kTries && RoomLocked(at) >= taken) return false;
      std::optional<std::uint64_t> arrival;
      if (auto known = memory_waits_.find(watch); known != memory_waits_.end()) {
        arrival = known->second.arrival;
      }
      MEMD_RETURN_IF_ERROR(
          waiters_.Add(watch, session, caller->peer.uid, copy_of, std::move(wake), limits_));
      const std::uint64_t place =
          memory_queue_.Add(watch, caller->peer.uid, at, taken, arrival);
      memory_waits_[watch] = MemoryWait{session, at, place};
      memory_waiting_ = memory_queue_.size();
      return true;
    }();
    if (!waits.ok()) return waits.status();
    if (*waits) return std::nullopt;
  }
}

absl::Status Broker::NoRoomWithin(SessionId session, const CreateParams& params,
                                  absl::Duration wait) const {
  absl::MutexLock lock(&mu_);
  return NoRoomLocked(session, "buffer", params, wait);
}

absl::Status Broker::NoRoomForCopyWithin(SessionId session, const OpenParams& params,
                                         absl::Duration wait) const {
  absl::MutexLock lock(&mu_);
  CreateParams copy{.name = params.name, .location = params.location.value_or(Location{})};
  // The size only of a buffer the caller may open: the name may stand for
  // another buffer by now.
  auto caller = sessions_.find(session);
  const auto named = names_.find(params.name);
  const Buffer* buffer = named == names_.end() ? nullptr : buffers_.at(named->second).get();
  if (caller == sessions_.end() || buffer == nullptr || !params.location.has_value() ||
      !MayOpenLocked(caller->second, buffer->info, params).ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat("no room for a copy of buffer ", Quoted(params.name), " came within ",
                     absl::FormatDuration(wait)));
  }
  copy.size = buffer->info.size;
  return NoRoomLocked(session, "a copy of buffer", copy, wait);
}

absl::Status Broker::NoRoomLocked(SessionId session, absl::string_view what,
                                  const CreateParams& params, absl::Duration wait) const {
  std::string message = absl::StrCat("no room for ", what, " ", Quoted(params.name), " (",
                                     FormatBytes(params.size), ") ");
  auto caller = sessions_.find(session);
  const pool::Pool* pool = params.auto_location ? nullptr : pools_.Find(params.location);
  if (caller == sessions_.end() || pool == nullptr) {
    return absl::DeadlineExceededError(
        absl::StrCat(message, "came within ", absl::FormatDuration(wait)));
  }
  const Location& at = params.location;
  const pool::PoolStats stats = pool->Stats();
  absl::StrAppend(&message, "at ", at.ToString(), " within ", absl::FormatDuration(wait),
                  ": it takes ", FormatBytes(pool->AllocationBytes(params.size)), "; ");
  if (stats.limit_bytes > 0) {
    absl::StrAppend(&message, FormatBytes(RoomLocked(at)), " of ",
                    FormatBytes(stats.limit_bytes), " free there");
  } else {
    absl::StrAppend(&message, FormatBytes(stats.used_bytes), " in use there");
  }
  if (const std::uint64_t queued = memory_queue_.bytes_at(at); queued > 0) {
    absl::StrAppend(&message, ", ", FormatBytes(queued), " asked by calls waiting there");
  }
  // Who holds it: every uid's share for root, else the caller's and the rest.
  const uid_t uid = caller->second.peer.uid;
  std::vector<std::pair<std::uint64_t, uid_t>> holders;
  std::uint64_t others = 0;
  std::uint64_t own = 0;
  for (const auto& [key, held] : usage_.by_uid()) {
    if (!(key.second == at)) continue;
    holders.emplace_back(held.bytes, key.first);
    if (key.first == uid) {
      own = held.bytes;
    } else {
      others += held.bytes;
    }
  }
  if (uid == 0) {
    std::sort(holders.rbegin(), holders.rend());
    absl::StrAppend(&message, "; held by");
    constexpr std::size_t kNamed = 3;
    for (std::size_t i = 0; i < holders.size() && i < kNamed; ++i) {
      absl::StrAppend(&message, i == 0 ? " " : ", ", "uid ", holders[i].second, " ",
                      FormatBytes(holders[i].first));
    }
    if (holders.size() > kNamed) absl::StrAppend(&message, ", ...");
  } else {
    absl::StrAppend(&message, "; you (uid ", uid, ") hold ", FormatBytes(own),
                    ", other users ", FormatBytes(others));
  }
  return absl::DeadlineExceededError(message);
}

void Broker::MemoryFreed(const std::vector<Location>& freed_at) {
  WithLock([&](AfterUnlock& after) {
    std::vector<Location> places;
    for (const Location& at : freed_at) {
      if (std::find(places.begin(), places.end(), at) == places.end()) places.push_back(at);
    }
    for (const Location& at : places) {
      for (MemoryQueue::Id id : memory_queue_.Take(at, RoomLocked(at))) {
        // Its place stays in memory_waits_ until it succeeds or goes.
        if (Waiters::Wake wake = waiters_.Take(id)) after.wakes.push_back(std::move(wake));
      }
    }
    memory_waiting_ = memory_queue_.size();
  });
}

std::uint64_t Broker::RoomLocked(const Location& at) const {
  const pool::Pool* pool = pools_.Find(at);
  if (pool == nullptr) return 0;
  const pool::PoolStats stats = pool->Stats();
  if (stats.limit_bytes == 0) return ~std::uint64_t{0};
  return stats.limit_bytes > stats.used_bytes ? stats.limit_bytes - stats.used_bytes : 0;
}

void Broker::ForgetMemoryWaitLocked(WatchId watch) {
  if (memory_waits_.erase(watch) == 0) return;
  memory_queue_.Remove(watch);
  memory_waiting_ = memory_queue_.size();
}

absl::StatusOr<std::uint64_t> Broker::MakeRoomLocked(const Location& at, std::uint64_t need,
                                                     AfterUnlock& after,
                                                     std::optional<uid_t> quota_of,
                                                     std::optional<EvictionRequester> requester) {
  std::vector<EvictionCandidate> candidates;
  for (const auto& [id, record] : buffers_) {
    const Buffer& buffer = *record;
    if (!(buffer.info.location == at) || buffer.parked || buffer.awaiting_holders) continue;
    // A quota is one uid's: only what is charged to it may go.
    if (quota_of.has_value() && buffer.charge.uid != *quota_of) continue;
    EvictionCandidate candidate{id, buffer.charge.uid, buffer.allocation.bytes,
                                buffer.last_used};
    // A copy in flight from or to it keeps its memory busy: as a lease.
    const bool claimed = buffer.pin->claims() > 0;
    if (buffer.is_copy) {
      if (buffer.home == 0) continue;  // Orphaned: goes with its holders.
      const Buffer& home = *buffers_.at(buffer.home);
      candidate.demotable = true;
      candidate.pinned = home.info.retention == Retention::kPinned;
      // Leased, filling, or the only current copy: not a demotion.
      candidate.leased = claimed || !home.replicas->MayDrop(at).ok();
    } else {
      if (buffer.info.unlinked) continue;
      candidate.pinned = buffer.info.retention != Retention::kEvictable;
      candidate.leased = claimed || TotalLeasesLocked(buffer) > 0 ||
                         buffer.info.state != BufferState::kSealed;
    }
    candidates.push_back(candidate);
  }
  std::vector<UidHolding> holdings;
  for (const auto& [key, held] : usage_.by_uid()) {
    if (key.second == at) holdings.push_back(UidHolding{key.first, held.bytes});
  }
  MEMD_ASSIGN_OR_RETURN(EvictionPlan plan,
                        PlanEviction(candidates, holdings, need, requester));
  PressureCounts& counts = pressure_[at.ToString()];
  const absl::Time now = clock_.Now();
  after.on_pressure = pressure_log_;
  for (BufferId id : plan.victims) {
    Buffer& victim = *buffers_.at(id);
    const std::uint64_t bytes = victim.allocation.bytes;
    if (pressure_log_) {
      const absl::Duration unused = absl::Trunc(now - victim.last_used, absl::Seconds(1));
      after.pressure_lines.push_back(absl::StrCat(
          quota_of.has_value() ? absl::StrCat("uid ", *quota_of, "'s quota at ")
                               : std::string("memory pressure on "),
          at.ToString(), ": ",
          victim.is_copy ? "demoted the copy of" : "evicted", " buffer ",
          Quoted(victim.info.name), " (", FormatBytes(bytes), ", uid ", victim.charge.uid,
          ", unused for ", absl::FormatDuration(unused), ") to make room for ",
          FormatBytes(need)));
    }
    if (victim.is_copy) {
      Buffer& home = *buffers_.at(victim.home);
      // MayDrop held when planned, and nothing changed since under mu_.
      MEMD_RETURN_IF_ERROR(home.replicas->Drop(at));
      home.copies.erase(at);
      OrphanLocked(victim, after);
      ++counts.demotions;
      counts.demoted_bytes += bytes;
      continue;
    }
    // What MayAccess and the message read, not the whole info (attributes,
    // usage): 4096 names stay small.
    BufferInfo seen;
    seen.name = victim.info.name;
    seen.location = victim.info.location;
    seen.owner_uid = victim.info.owner_uid;
    seen.owner_gid = victim.info.owner_gid;
    seen.mode = victim.info.mode;
    evicted_.insert_or_assign(victim.info.name,
                              Evicted{std::move(seen), now, bytes, quota_of});
    evicted_order_.emplace_back(victim.info.name, now);
    while (evicted_order_.size() > kMaxEvictedNames) {
      const auto& [name, when] = evicted_order_.front();
      auto it = evicted_.find(name);
      if (it != evicted_.end() && it->second.at == when) evicted_.erase(it);
      evicted_order_.pop_front();
    }
    UnlinkLocked(victim, after);
    ++counts.evictions;
    counts.evicted_bytes += bytes;
  }
  return plan.bytes;
}

void Broker::SetPressureLog(std::function<void(const std::string&)> log) {
  absl::MutexLock lock(&mu_);
  pressure_log_ = std::move(log);
}

absl::Status Broker::NoBufferLocked(const Session& caller, const std::string& name) const {
  auto it = evicted_.find(name);
  if (it == evicted_.end() || clock_.Now() - it->second.at > kEvictedNameMemory ||
      !MayAccess(caller.peer, it->second.info, Access::kRead)) {
    return absl::NotFoundError(absl::StrCat("no buffer named ", Quoted(name)));
  }
  const Evicted& evicted = it->second;
  const std::string why =
      evicted.quota_of.has_value()
          ? absl::StrCat(" to keep uid ", *evicted.quota_of, " within its quota at ")
          : std::string(" under memory pressure on ");
  return absl::NotFoundError(absl::StrCat(
      "no buffer named ", Quoted(name), ": it was evicted at ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", evicted.at, absl::UTCTimeZone()), why,
      evicted.info.location.ToString(), " (",
      FormatBytes(evicted.bytes), ", nobody held it, retention evictable, owner uid ",
      evicted.info.owner_uid, ")"));
}

}  // namespace memd::broker
