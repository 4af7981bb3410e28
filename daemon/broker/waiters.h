#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "daemon/broker/types.h"

namespace memd::broker {

/// The calls waiting in the daemon: opens waiting for a name to be sealed
/// (Broker::OpenOrWatch), one watch each, by id, on a name, for a session of
/// a uid, with the callback that wakes it; and WaitTransfer calls, counted
/// the same way on no name (Broker::AddTransferWait), since each holds a
/// call and its buffers in the daemon just as long. Bounds them together
/// per session, per uid and in the whole daemon (max_waits_per_session,
/// max_waits_per_uid, max_waits) and counts what it refuses.
///
/// Owns the watches and their callbacks but never runs a callback: every way
/// a watch leaves (cancelled, woken by its name, woken by its session's end)
/// goes through one private step, and the callbacks of woken watches are
/// handed back for the broker to run once its mutex is released.
///
/// Not thread-safe: the broker calls it under its own mutex, because "the
/// name would wait" and "the wait is registered" must be one step that no
/// seal can fall between.
/// Errors: RESOURCE_EXHAUSTED (Add: a limit, with the numbers and its key).
class Waiters {
 public:
  using Wake = std::function<void()>;

  // Fresh ids for Add; never 0.
  WatchId NewId() { return next_id_++; }

  // Registers `wake` under `id` (not registered already): it is handed back
  // once by TakeName(name) (never for an empty name) or
  // TakeSession(session), unless Cancel(id) comes first. Errors: RESOURCE_EXHAUSTED when the session, the uid or the
  // daemon waits on as many as `limits` allows, checked in that order.
  absl::Status Add(WatchId id, SessionId session, uid_t uid,
                   const std::string& name, Wake wake, const BrokerLimits& limits);

  // Forgets a watch without handing back its callback. False when it is not
  // registered: taken already (its wake has run or is on its way), or never.
  bool Cancel(WatchId id);

  // Takes every watch on `name` (it has been sealed), in the order they
  // were registered, and returns their callbacks.
  std::vector<Wake> TakeName(const std::string& name);

  // Takes every watch of `session` (it has ended) and returns their
  // callbacks.
  std::vector<Wake> TakeSession(SessionId session);

  // Takes the watch `id` (a waiting create's turn for memory came) and
  // returns its callback; an empty one when it is not registered.
  Wake Take(WatchId id);

  // Forgets every watch without handing back any callback.
  void Clear();

  // Whether `id` is registered (not taken, not cancelled).
  bool Has(WatchId id) const { return watches_.contains(id); }

  std::size_t size() const { return watches_.size(); }
  std::uint64_t waits_of_session(SessionId session) const;
  std::uint64_t waits_of_uid(uid_t uid) const;

  // Adds refused since start, by the limit that refused them.
  struct Rejections {
    std::uint64_t per_session = 0;  // max_waits_per_session
    std::uint64_t per_uid = 0;      // max_waits_per_uid
    std::uint64_t total = 0;        // max_waits
  };
  const Rejections& rejections() const { return rejections_; }

 private:
  struct Watch {
    SessionId session = 0;
    uid_t uid = 0;
    std::string name;
    Wake wake;
  };
  using Watches = absl::flat_hash_map<WatchId, Watch>;

  // The one way out of a watch: drops it from every index and count and
  // returns its callback.
  Wake Remove(Watches::iterator watch);

  Watches watches_;
  // Ids in the order they were registered, so that a seal wakes in order.
  absl::flat_hash_map<std::string, std::vector<WatchId>> by_name_;
  absl::flat_hash_map<SessionId, absl::flat_hash_set<WatchId>> by_session_;
  // Uids with any watch, and how many.
  absl::flat_hash_map<uid_t, std::uint64_t> by_uid_;
  Rejections rejections_;
  WatchId next_id_ = 1;
};

}  // namespace memd::broker
