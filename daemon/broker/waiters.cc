#include "daemon/broker/waiters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace memd::broker {

absl::Status Waiters::Add(WatchId id, SessionId session, uid_t uid,
                          const std::string& name, Wake wake,
                          const BrokerLimits& limits) {
  const std::uint64_t of_session = waits_of_session(session);
  if (of_session >= limits.max_waits_per_session) {
    ++rejections_.per_session;
    return absl::ResourceExhaustedError(absl::StrCat(
        "session ", session, " already waits in ", of_session,
        " calls (Open, Create, WaitTransfer); the limit is ", limits.max_waits_per_session,
        " (max_waits_per_session)"));
  }
  const std::uint64_t of_uid = waits_of_uid(uid);
  if (of_uid >= limits.max_waits_per_uid) {
    ++rejections_.per_uid;
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", uid, " has ", of_uid, " calls waiting (Open, Create, WaitTransfer); the limit is ",
        limits.max_waits_per_uid, " (max_waits_per_uid)"));
  }
  // Each waiting call holds a gRPC call and its buffers in the daemon:
  // bounded whatever the number of uids.
  if (watches_.size() >= limits.max_waits) {
    ++rejections_.total;
    return absl::ResourceExhaustedError(
        absl::StrCat(watches_.size(), " calls are waiting (Open, Create, WaitTransfer); ",
                     "the limit is ", limits.max_waits, " (max_waits)"));
  }
  watches_.emplace(id, Watch{session, uid, name, std::move(wake)});
  if (!name.empty()) by_name_[name].push_back(id);
  by_session_[session].insert(id);
  ++by_uid_[uid];
  return absl::OkStatus();
}

bool Waiters::Cancel(WatchId id) {
  auto watch = watches_.find(id);
  if (watch == watches_.end()) return false;
  Remove(watch);
  return true;
}

std::vector<Waiters::Wake> Waiters::TakeName(const std::string& name) {
  std::vector<Wake> wakes;
  auto by_name = by_name_.find(name);
  if (by_name == by_name_.end()) return wakes;
  // Out of the index first: Remove then has no list to search for each.
  const std::vector<WatchId> ids = std::move(by_name->second);
  by_name_.erase(by_name);
  for (WatchId id : ids) wakes.push_back(Remove(watches_.find(id)));
  return wakes;
}

std::vector<Waiters::Wake> Waiters::TakeSession(SessionId session) {
  std::vector<Wake> wakes;
  auto by_session = by_session_.find(session);
  if (by_session == by_session_.end()) return wakes;
  // Remove edits the set it would iterate.
  const std::vector<WatchId> ids(by_session->second.begin(), by_session->second.end());
  for (WatchId id : ids) wakes.push_back(Remove(watches_.find(id)));
  return wakes;
}

Waiters::Wake Waiters::Take(WatchId id) {
  auto watch = watches_.find(id);
  if (watch == watches_.end()) return nullptr;
  return Remove(watch);
}

void Waiters::Clear() {
  watches_.clear();
  by_name_.clear();
  by_session_.clear();
  by_uid_.clear();
}

std::uint64_t Waiters::waits_of_session(SessionId session) const {
  auto it = by_session_.find(session);
  return it == by_session_.end() ? 0 : it->second.size();
}

std::uint64_t Waiters::waits_of_uid(uid_t uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

Waiters::Wake Waiters::Remove(Watches::iterator watch) {
  const WatchId id = watch->first;
  Watch& removed = watch->second;
  // Absent when TakeName took the name's whole list already.
  if (auto by_name = by_name_.find(removed.name); by_name != by_name_.end()) {
    std::vector<WatchId>& ids = by_name->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) by_name_.erase(by_name);
  }
  auto by_session = by_session_.find(removed.session);
  by_session->second.erase(id);
  if (by_session->second.empty()) by_session_.erase(by_session);
  auto by_uid = by_uid_.find(removed.uid);
  if (--by_uid->second == 0) by_uid_.erase(by_uid);
  Wake wake = std::move(removed.wake);
  watches_.erase(watch);
  return wake;
}

}  // namespace memd::broker
