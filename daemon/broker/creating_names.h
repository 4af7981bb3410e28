#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "daemon/broker/types.h"

namespace memd::broker {

/// Names whose buffer is being created right now: a Create or OpenOrCreate
/// that found the name free and is allocating its memory outside the
/// broker's mutex. While a name is here, no other create of it allocates: a
/// later Create or OpenOrCreate of the name waits for this one to end (its
/// watch noted here, its wake registered in Waiters) and then looks again,
/// as if it had come after. So N callers of one cold name allocate one
/// buffer, not N, and never fail for lack of room for copies nobody keeps.
///
/// Invariant: a name is here only while its creator's allocation call runs
/// (Begin just before it, End in the same lock step that names the buffer
/// or after the allocation failed). Nothing a client does later keeps it:
/// neither a session that ends meanwhile (its creator's registration then
/// fails, and End comes all the same) nor waits on it. Names are per name,
/// so one uid's creates in flight delay no other name's.
///
/// Owns the names and the watch ids waiting on each; never runs a wake (the
/// broker takes each watch from Waiters at End). Not thread-safe: the
/// broker's mutex guards it. No errors.
class CreatingNames {
 public:
  // Marks `name` as being created; false (and nothing changes) when
  // another create of it is in flight already.
  bool Begin(const std::string& name);

  // Whether a create of `name` is in flight.
  bool Contains(const std::string& name) const { return names_.contains(name); }

  // Notes that `watch` waits for the create of `name` (in flight: Contains)
  // to end. Ids for which `still_waits` is false (cancelled, or woken by
  // their session's end) are dropped first, so the list stays as long as
  // the watches that really wait.
  void Wait(const std::string& name, WatchId watch,
            absl::FunctionRef<bool(WatchId)> still_waits);

  // Ends the create of `name`: returns the watches that waited for it, in
  // the order they came. Nothing for a name not in flight.
  std::vector<WatchId> End(const std::string& name);

  // Creates in flight now.
  std::size_t size() const { return names_.size(); }

 private:
  // By name: the watches waiting for its create to end.
  absl::flat_hash_map<std::string, std::vector<WatchId>> names_;
};

}  // namespace memd::broker
