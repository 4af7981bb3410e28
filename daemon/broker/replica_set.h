#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/location.h"

namespace memd::broker {

// A buffer's content version. The set starts at 1; every Written() adds 1.
// Generation 0 means "no content yet" (a replica whose first fill runs).
using Generation = std::uint64_t;

enum class ReplicaState {
  kCurrent,  // Holds the buffer's current generation; may be leased.
  kStale,    // Holds an older generation; readers that hold it keep it.
  kFilling,  // A copy into it runs; nobody may lease it until it ends.
};
std::string_view ReplicaStateName(ReplicaState state);  // "current", ...

// The buffer-level word in DotCompute's terms. "Host side" is host and
// pinned, "device side" is device:N; a filling replica counts as stale.
enum class SyncState {
  kHostOnly,      // Every replica on the host side (current or not).
  kDeviceOnly,    // Every replica on the device side.
  kSynchronized,  // Replicas on both sides, all current.
  kHostDirty,     // Both sides; current replicas only on the host side.
  kDeviceDirty,   // Both sides; current replicas only on the device side.
  kMixed,         // Both sides have a current replica and some replica is
                  // stale: DotCompute's two-copy words cannot say this.
};
std::string_view SyncStateName(SyncState state);  // "host_only", ...

// What an open at a location must do (ReplicaSet::PlanOpen).
struct OpenPlan {
  enum class Action {
    kServe,  // A current replica is there: lease it now.
    kWait,   // A fill of that location runs: wait for its FinishFill.
    kFill,   // Start a fill (BeginFill) from `source`, then serve.
    kBusy,   // The replica is stale (or current, for a writer) and leased
             // by others: refreshing it would change bytes under them. The
             // caller waits for those leases to end, or serves the open at
             // another location that is current.
  };
  Action action = Action::kServe;
  std::optional<Location> source;  // kFill only: the replica to copy from.
};

// One running fill, from BeginFill to FinishFill.
struct FillTicket {
  std::uint64_t fill = 0;      // Tells this fill from an older one there.
  Location at;                 // The replica being filled.
  Location source;             // A current replica when the fill began.
  Generation generation = 0;   // The generation being copied.
  bool created = false;        // The replica is new: no memory there yet.
};

// How a fill ended (ReplicaSet::FinishFill).
enum class FillResult {
  kCurrent,       // Copied the current generation: the replica serves.
  kOutdated,      // Copied, but a write landed meanwhile: kStale; the next
                  // open (or Sync) refills.
  kRemoved,       // The copy failed and the replica was new: gone.
  kStaleAgain,    // The copy failed on an existing replica: back to kStale.
};

// A replica as Stat, inspect and metrics show it.
struct ReplicaReport {
  Location location;
  ReplicaState state = ReplicaState::kCurrent;
  Generation generation = 0;  // The content it holds.
  std::uint32_t readers = 0;
  std::uint32_t writers = 0;
};

// The last fill that failed, for the buffer's info: the buffer stays usable
// at its other locations and says why one is missing. Kept until a later
// fill fails or a fill at the same location succeeds.
struct FillFailure {
  Location at;
  Generation generation = 0;
  absl::Status status;
};

// The replicas of one named buffer: at most one per Location, each current,
// stale or filling, with the generation it holds and its lease counts, and
// the buffer's current generation. It decides; it moves no bytes and owns
// no memory: the broker makes each copy through the transfer engine between
// BeginFill and FinishFill, and allocates and frees the replicas' memory.
//
// Invariants after every call: exactly the replicas at the current
// generation are kCurrent; at least one replica is kCurrent; a kFilling
// replica has no leases; no count below zero; at most `max_replicas`.
//
// Readers are served only by a current replica, and a replica with leases is
// never refilled: a reader keeps the bytes it mapped, even after a write
// elsewhere made them stale. A writer needs a current replica nobody reads.
//
// Thread-compatible: it lives in a buffer's record under the broker's lock.
class ReplicaSet {
 public:
  // One current replica at `primary`, generation 1. Errors: INVALID_ARGUMENT
  // when `max_replicas` is 0.
  static absl::StatusOr<ReplicaSet> Created(const Location& primary,
                                            std::size_t max_replicas);

  // What an open at `at` must do; changes nothing. A fill's source is a
  // current replica of the same kind when there is one (device:N from the
  // lowest other current device, a peer copy; host or pinned from the
  // other host-side one), else from the other side, pinned before host
  // (the engine's DMA from pinned memory needs no staging) and the lowest
  // device ordinal. Errors: RESOURCE_EXHAUSTED when `at` has no replica and
  // the buffer has `max_replicas` already.
  absl::StatusOr<OpenPlan> PlanOpen(const Location& at, bool for_write) const;

  // Starts a fill of `at` (created in kFilling when new). Errors:
  // FAILED_PRECONDITION when `at` is current, already filling, or stale and
  // leased; RESOURCE_EXHAUSTED as PlanOpen.
  absl::StatusOr<FillTicket> BeginFill(const Location& at);

  // Ends the fill `ticket` names with the copy's status. A failed copy is
  // kept as last_failure(). Errors: FAILED_PRECONDITION when that fill is
  // not running (finished already, or the replica was dropped).
  absl::StatusOr<FillResult> FinishFill(const FillTicket& ticket,
                                        const absl::Status& copy_status);

  // Lease counts. Add*: NOT_FOUND when `at` has no replica;
  // FAILED_PRECONDITION when it is not current, and for a writer when it
  // has readers. Remove*: NOT_FOUND as Add*; INTERNAL when the count is 0.
  absl::Status AddReader(const Location& at);
  absl::Status RemoveReader(const Location& at);
  absl::Status AddWriter(const Location& at);
  absl::Status RemoveWriter(const Location& at);

  // A writer at `at` sealed or called Sync: generation + 1, `at` current at
  // it, every other current replica stale (a running fill will finish
  // kOutdated). Errors: NOT_FOUND; FAILED_PRECONDITION when `at` is not
  // current or holds no writable lease.
  absl::Status Written(const Location& at);

  // What Sync must refresh: the stale replicas nobody holds, in report
  // order; the broker starts their fills at once. Leased stale replicas are
  // left to their next open after the leases end.
  std::vector<Location> SyncTargets() const;

  // Removes the replica at `at`. Errors: NOT_FOUND; FAILED_PRECONDITION
  // when it is leased, filling, or the only current replica.
  absl::Status Drop(const Location& at);
  // Whether Drop(at) would succeed, with its error; changes nothing.
  absl::Status MayDrop(const Location& at) const;

  Generation generation() const { return generation_; }
  std::size_t size() const { return replicas_.size(); }
  std::size_t max_replicas() const { return max_replicas_; }
  // Host, pinned, then devices by ordinal.
  std::vector<ReplicaReport> Replicas() const;
  SyncState State() const;
  const std::optional<FillFailure>& last_failure() const { return last_failure_; }

 private:
  struct Replica {
    ReplicaReport report;
    std::uint64_t fill = 0;  // The running fill's number; 0: none.
    bool created = false;    // Filling and never held content.
  };

  ReplicaSet(const Location& primary, std::size_t max_replicas);
  Replica* Find(const Location& at);
  const Replica* Find(const Location& at) const;
  // Find, or NOT_FOUND naming the location.
  absl::StatusOr<Replica*> Existing(const Location& at);
  // One lease fewer on `count` of the replica at `at`; INTERNAL below zero.
  absl::Status RemoveLease(const Location& at, std::uint32_t ReplicaReport::*count,
                           std::string_view what);
  absl::Status RoomForOneMore(const Location& at) const;
  std::optional<Location> SourceFor(const Location& at) const;
  std::size_t CurrentCount() const;

  std::size_t max_replicas_;
  Generation generation_ = 1;
  std::uint64_t next_fill_ = 1;
  std::vector<Replica> replicas_;  // Sorted as Replicas() reports.
  std::optional<FillFailure> last_failure_;
};

}  // namespace memd::broker
