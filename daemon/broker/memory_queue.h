#pragma once

// Creates that wait for memory (Broker::CreateOrWait): in which order the
// calls waiting for room at one location are tried again when memory there
// is freed. Only the order: the waits themselves, their limits and their
// callbacks are Waiters' (each waiting create is a watch there too).
//
// Fair across uids, first come first served within a uid: the next waiter
// is the head of the uid served longest ago at that location (a uid that
// has not been served since it began waiting first), ties by arrival. One
// uid's thousand waiting creates therefore take turns with another uid's
// one, instead of going first because they came first (Dynamo's memory
// service learned to retry allocation in order; Ray learned that one
// client's flood must not starve the rest).
//
// Pure: no broker state, no locks, no clock. Not thread-safe.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/location.h"
#include "daemon/broker/types.h"

namespace memd::broker {

class MemoryQueue {
 public:
  using Id = std::uint64_t;

  // Queues `id` (not queued already) for `bytes` at `at`. `arrival` keeps
  // an earlier place: a waiter that was woken, tried and found the room
  // taken again comes back with the arrival Add returned the first time;
  // nullopt: a new arrival, last. Returns the arrival.
  std::uint64_t Add(Id id, uid_t uid, const Location& at, std::uint64_t bytes,
                    std::optional<std::uint64_t> arrival = std::nullopt);

  // Forgets `id`; false when it is not queued.
  bool Remove(Id id);

  // Takes the waiters at `at` that `free_bytes` serves, in the fair order:
  // each in turn while what they ask together fits. The first that does
  // not fit stops the turn (a large create is not overtaken forever by
  // small ones), so nothing may be taken.
  std::vector<Id> Take(const Location& at, std::uint64_t free_bytes);

  // The waiters at `at` in the order Take would serve them, with their
  // bytes: for messages and stats.
  std::vector<std::pair<Id, std::uint64_t>> Order(const Location& at) const;

  std::size_t size() const { return waiters_.size(); }
  // What the waiters at `at` ask for together.
  std::uint64_t bytes_at(const Location& at) const;

  // How many wait at each location and for how many bytes, by location
  // name: every uid's, or only `only`'s. Locations where nobody (of `only`)
  // waits are absent.
  std::map<std::string, MemoryWaits> ByLocation(std::optional<uid_t> only = std::nullopt) const;

 private:
  struct Waiter {
    uid_t uid = 0;
    Location at;
    std::uint64_t bytes = 0;
    std::uint64_t arrival = 0;
  };
  struct PerUid {
    std::set<std::pair<std::uint64_t, Id>> queue;  // (arrival, id)
    std::uint64_t last_served = 0;  // 0: not since it began waiting.
  };
  struct PerLocation {
    std::map<uid_t, PerUid> uids;
    std::uint64_t bytes = 0;
    std::uint64_t turns = 0;  // Serves so far: last_served's clock.
  };

  // The uid whose head goes next at `place`, or nullptr.
  static const std::pair<const uid_t, PerUid>* NextUid(const PerLocation& place);
  void Erase(Id id, const Waiter& waiter);

  absl::flat_hash_map<Id, Waiter> waiters_;
  absl::flat_hash_map<Location, PerLocation> places_;
  std::uint64_t next_arrival_ = 1;
};

}  // namespace memd::broker
