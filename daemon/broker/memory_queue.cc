#include "daemon/broker/memory_queue.h"

#include <tuple>

namespace memd::broker {

std::uint64_t MemoryQueue::Add(Id id, uid_t uid, const Location& at, std::uint64_t bytes,
                               std::optional<std::uint64_t> arrival) {
  const std::uint64_t place = arrival.value_or(next_arrival_);
  if (!arrival.has_value()) ++next_arrival_;
  waiters_[id] = Waiter{uid, at, bytes, place};
  PerLocation& where = places_[at];
  where.uids[uid].queue.emplace(place, id);
  where.bytes += bytes;
  return place;
}

bool MemoryQueue::Remove(Id id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  const Waiter waiter = it->second;
  waiters_.erase(it);
  Erase(id, waiter);
  return true;
}

void MemoryQueue::Erase(Id id, const Waiter& waiter) {
  auto place = places_.find(waiter.at);
  PerLocation& where = place->second;
  auto uid = where.uids.find(waiter.uid);
  uid->second.queue.erase({waiter.arrival, id});
  where.bytes -= waiter.bytes;
  // A uid with nothing waiting starts afresh: its next wait is not held
  // against its earlier turns.
  if (uid->second.queue.empty()) where.uids.erase(uid);
  if (where.uids.empty()) places_.erase(place);
}

const std::pair<const uid_t, MemoryQueue::PerUid>* MemoryQueue::NextUid(
    const PerLocation& place) {
  const std::pair<const uid_t, PerUid>* next = nullptr;
  for (const auto& entry : place.uids) {
    const PerUid& uid = entry.second;
    if (next == nullptr ||
        std::make_tuple(uid.last_served, uid.queue.begin()->first) <
            std::make_tuple(next->second.last_served, next->second.queue.begin()->first)) {
      next = &entry;
    }
  }
  return next;
}

std::vector<MemoryQueue::Id> MemoryQueue::Take(const Location& at, std::uint64_t free_bytes) {
  std::vector<Id> taken;
  std::uint64_t left = free_bytes;
  while (true) {
    auto where = places_.find(at);
    if (where == places_.end()) break;
    const auto* next = NextUid(where->second);
    const Id id = next->second.queue.begin()->second;
    const Waiter waiter = waiters_.at(id);
    if (waiter.bytes > left) break;
    left -= waiter.bytes;
    // Served: its uid goes to the back of the turns (if it still waits).
    where->second.uids.at(waiter.uid).last_served = ++where->second.turns;
    waiters_.erase(id);
    Erase(id, waiter);
    taken.push_back(id);
  }
  return taken;
}

std::vector<std::pair<MemoryQueue::Id, std::uint64_t>> MemoryQueue::Order(
    const Location& at) const {
  std::vector<std::pair<Id, std::uint64_t>> order;
  auto place = places_.find(at);
  if (place == places_.end()) return order;
  // Take's choices on a copy, with room for everything.
  PerLocation where = place->second;
  while (!where.uids.empty()) {
    const auto* next = NextUid(where);
    const uid_t uid = next->first;
    PerUid& queue = where.uids.at(uid);
    const Id id = queue.queue.begin()->second;
    order.emplace_back(id, waiters_.at(id).bytes);
    queue.queue.erase(queue.queue.begin());
    queue.last_served = ++where.turns;
    if (queue.queue.empty()) where.uids.erase(uid);
  }
  return order;
}

std::uint64_t MemoryQueue::bytes_at(const Location& at) const {
  auto place = places_.find(at);
  return place == places_.end() ? 0 : place->second.bytes;
}

std::map<std::string, MemoryWaits> MemoryQueue::ByLocation(std::optional<uid_t> only) const {
  std::map<std::string, MemoryWaits> waiting;
  for (const auto& [id, waiter] : waiters_) {
    if (only.has_value() && waiter.uid != *only) continue;
    MemoryWaits& at = waiting[waiter.at.ToString()];
    ++at.calls;
    at.bytes += waiter.bytes;
  }
  return waiting;
}

}  // namespace memd::broker
