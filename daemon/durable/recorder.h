#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/broker/buffer_journal.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/state.h"
#include "daemon/durable/state_journal.h"
#include "daemon/pool/segment_journal.h"

namespace memd::durable {

/// Keeps the durable state true to the daemon: hears every segment a pool
/// reserves or gives back and every buffer change the broker makes, stores
/// each segment's descriptor in the service manager's store, and journals
/// the change in the state file (docs/design.md, "Durability").
///
/// Orders that make a crash at any point safe: a segment's descriptor is
/// stored before the segment is journaled, and dropped from the store after
/// its removal is journaled (a descriptor without a record is closed by the
/// next recovery; a record without a descriptor never happens). The broker
/// journals a buffer under its mutex, before its memory goes back.
///
/// Until Begin, and after Detach, it records nothing: pools reserve nothing
/// before Begin (no client is served), and a daemon that shuts down
/// detaches before its sessions end, so that the leases and memory a
/// shutdown gives back stay in the state for the next memd.
///
/// The store is the node's, and bounded (the unit's FileDescriptorStoreMax=,
/// which systemd 252 does not tell the service): so that one uid cannot
/// fill it and leave every other uid's memory unkept, at most
/// `max_segments_per_uid` segments of one uid's domains are stored (what a
/// recovery adopted counts, and may be past it). A segment past that stays
/// out of the state, and its buffers with it; the log says so.
///
/// Owns the state journal; borrows the store, which must outlive it.
/// Thread-safe. A failing store or journal does not fail the call that
/// changed the state (the buffer exists either way): it is counted and
/// logged, and failures() says how many.
class Recorder : public pool::SegmentJournal, public broker::BufferJournal {
 public:
  // `device_uuid(location)`: the GPU's UUID for a device location, empty
  // for host memory; checked when a later memd adopts the segment.
  // `max_segments_per_uid`: 0 keeps every segment.
  Recorder(FdStore& store, std::function<std::string(const Location&)> device_uuid,
           std::uint64_t max_segments_per_uid = 0);
  ~Recorder() override;

  // Starts recording from `state` (what recovery adopted, or empty) in a
  // new state file of `epoch`, stored under StateFdName(epoch); then the
  // `superseded` names (the state files recovery read) are dropped from
  // the store. Errors: the state journal's and the store's.
  absl::Status Begin(const DurableState& state, std::uint64_t epoch,
                     std::vector<std::string> superseded);

  // Stops recording for good (shutdown): what happens afterwards stays out
  // of the state.
  void Detach();

  void SegmentAdded(const pool::SegmentRecord& segment, int durable_fd) override;
  void SegmentChanged(const pool::SegmentRecord& segment) override;
  void SegmentRemoved(std::uint64_t id) override;
  void BufferChanged(const broker::BufferInfo& info,
                     const pool::Allocation& allocation) override;
  void BufferFreed(broker::BufferId id) override;
  void SessionStarted(broker::SessionId id, uid_t uid, const std::string& token_digest) override;
  void SessionEnded(broker::SessionId id) override;
  void LeaseGranted(broker::LeaseId id, broker::SessionId session, broker::BufferId buffer,
                    broker::Access access) override;
  void LeaseEnded(broker::LeaseId id) override;

  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  // The ids in the state, so that nothing in it ever names what it lacks:
  // a buffer elsewhere than a recorded segment (memory that cannot outlive
  // memd) stays out, and so does a lease of a buffer or session not in it.
  struct InState {
    // Each segment's domain uid, and how many segments each uid has.
    absl::flat_hash_map<std::uint64_t, std::uint32_t> segments;
    absl::flat_hash_map<std::uint32_t, std::uint64_t> segments_per_uid;
    absl::flat_hash_set<std::uint64_t> buffers;
    absl::flat_hash_set<std::uint64_t> sessions;
    absl::flat_hash_set<std::uint64_t> leases;
  };
  SegmentEntry EntryOf(const pool::SegmentRecord& segment) const;
  bool recording();
  // Journals `change` if recording; `keep(in_state_)` says whether it
  // belongs in the state (and notes it), under the same lock. (A FunctionRef:
  // a lease's capture would make a std::function allocate, on every open.)
  void Record(const Change& change, absl::FunctionRef<bool(InState&)> keep);
  void Failed(const absl::Status& status, const char* what);
  // Takes one of `uid`'s segment slots; false when it has none left (and
  // logs it, now and then).
  bool TakeSlotLocked(std::uint32_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FdStore& store_;
  const std::function<std::string(const Location&)> device_uuid_;
  const std::uint64_t max_segments_per_uid_;
  absl::Mutex mu_;
  std::unique_ptr<StateJournal> journal_ ABSL_GUARDED_BY(mu_);
  InState in_state_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::uint64_t> failures_{0};
  std::uint64_t segments_not_kept_ ABSL_GUARDED_BY(mu_) = 0;
};

// The broker's view of a buffer as the state keeps it, and back.
BufferEntry EntryOf(const broker::BufferInfo& info, const pool::Allocation& allocation);

}  // namespace memd::durable
